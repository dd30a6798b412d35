#!/usr/bin/env bash
# Fetches, on this Debian 12 machine, the Debian packages cabert builds against into .gpu-kit/debs (about 13 MB;
# the folder is git-ignored through .git/info/exclude), so that scripts/gpu_check.sh can build and test cabert on
# a GPU machine that reaches no package registry (the device tool's machines: CUDA toolkit, CMake, ninja and a
# python3 with PyTorch, but none of Debian's -dev packages). A session lent such a machine runs
#
#   bash scripts/gpu_kit.sh                                        # here, once
#   device run: command "bash scripts/gpu_check.sh", carry [".gpu-kit"], timeout_s 560
#
# The list is what CMake needs (headers, CMake and pkg-config files, protoc, pkg-config itself) plus the
# shared libraries these link and pull in at run time (cairo's: pixman, fontconfig, freetype, libpng, X11/xcb);
# gpu_check.sh puts only the ones that machine lacks on the library path.
set -euo pipefail
cd "$(dirname "$0")/.."
kit=.gpu-kit
grep -qxF "/$kit/" .git/info/exclude 2>/dev/null || echo "/$kit/" >> .git/info/exclude
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
echo "gpu_kit: $count packages, $(du -sh "$kit" | cut -f1), in $kit (carry it: \"$kit\")" >&2
