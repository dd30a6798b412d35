#!/usr/bin/env bash
# Fetches, on this Debian 12 machine, the Debian packages cabert builds against into .gpu-kit/debs (about 13 MB;
# the folder is git-ignored), and fairseq's CUDA kernels' sources into .gpu-kit/fairseq (below), so that
# scripts/gpu_check.sh can build and test cabert on a GPU machine that reaches no package registry (the device
# tool's machines: CUDA toolkit, CMake, ninja and a python3 with PyTorch, but none of Debian's -dev packages).
# A session lent such a machine runs
#
#   bash scripts/gpu_kit.sh                                        # here, once
#   device run: command "bash scripts/gpu_check.sh", carry [".gpu-kit"], timeout_s 560
#
# The list is what CMake needs (headers, CMake and pkg-config files, protoc, pkg-config itself) plus the
# shared libraries these link and pull in at run time (cairo's: pixman, fontconfig, freetype, libpng, X11/xcb);
# gpu_check.sh puts only the ones that machine lacks on the library path.
#
# fairseq's CUDA kernels (LightconvLayer, DynamicconvLayer: the baseline of issue 18's 2x target), about 10 MB:
# fairseq 0.12.2's source distribution from PyPI (its hash checked, as in recipes/bench/README.md), and the
# kernels' sources that distribution leaves out (lightconv_layer/ and dynamicconv_layer/ *.cpp, *.cu, *.cuh, and
# modules/cuda_utils.cu), exported from a git copy of facebookresearch/fairseq at tag v0.12.2: FAIRSEQ_GIT (a
# clone's .git or a bare copy; default: the device tool's mirror, /work/.mirror/facebookresearch+fairseq/repo,
# which `fetch github:facebookresearch/fairseq` brings). Without one the kit has no fairseq and gpu_check.sh
# runs the public rows without fairseq's CUDA kernels. PYTHON (.venv/bin/python) runs pip.
set -euo pipefail
cd "$(dirname "$0")/.."
kit=.gpu-kit
# The libraries of scripts/setup.sh's package list (keep the two in step), without the toolchain the GPU machine
# has, plus what they need at run time.
packages=(
  # build: headers, static archives, CMake and pkg-config files, tools
  libsentencepiece-dev libcli11-dev libprotobuf-dev protobuf-compiler libzstd-dev libgtest-dev libgmock-dev
  googletest libgloo-dev nlohmann-json3-dev zlib1g-dev libcairo2-dev pkgconf pkgconf-bin libpkgconf3
  # run time: the shared libraries those link, with their own dependencies
  libsentencepiece0 libprotobuf32 libprotobuf-lite32 libprotoc32 libzstd1 zlib1g libcairo2 libpixman-1-0
  libfontconfig1 fontconfig-config fonts-dejavu-core libfreetype6 libpng16-16 libxcb-shm0 libxcb1 libxcb-render0
  libxrender1 libx11-6 libx11-data libxext6 libexpat1 libbrotli1 libxau6 libxdmcp6 libbsd0 libmd0
)
rm -rf "$kit/debs"
mkdir -p "$kit/debs"
# apt-get download writes into the current directory; as root it warns that the _apt user cannot write there.
(cd "$kit/debs" && apt-get download "${packages[@]}" 2>&1 | grep -v "couldn't be accessed by user '_apt'" >&2)
count=$(find "$kit/debs" -name '*.deb' | wc -l)
if [ "$count" -ne "${#packages[@]}" ]; then
  echo "gpu_kit: expected ${#packages[@]} packages in $kit/debs, got $count" >&2
  exit 1
fi

fairseq_git=${FAIRSEQ_GIT:-/work/.mirror/facebookresearch+fairseq/repo}
rm -rf "$kit/fairseq"
if git --git-dir="$fairseq_git" rev-parse -q --verify v0.12.2 > /dev/null 2>&1; then
  mkdir -p "$kit/fairseq"
  "${PYTHON:-.venv/bin/python}" -m pip download -q --no-deps --no-binary fairseq fairseq==0.12.2 -d "$kit/fairseq"
  echo "34f1b18426bf3844714534162f065ab733e049597476daa35fffb4d06a92b524  $kit/fairseq/fairseq-0.12.2.tar.gz" |
    sha256sum -c --quiet -
  git --git-dir="$fairseq_git" archive -o "$kit/fairseq/cuda-layers.tar" v0.12.2 fairseq/modules/cuda_utils.cu \
    fairseq/modules/lightconv_layer fairseq/modules/dynamicconv_layer
else
  echo "gpu_kit: no fairseq v0.12.2 in $fairseq_git (FAIRSEQ_GIT): the kit has no fairseq CUDA kernels" >&2
fi
with_fairseq=""
if [ -d "$kit/fairseq" ]; then with_fairseq=", fairseq 0.12.2's sources"; fi
echo "gpu_kit: $count packages$with_fairseq, $(du -sh "$kit" | cut -f1), in $kit (carry it: \"$kit\")" >&2
