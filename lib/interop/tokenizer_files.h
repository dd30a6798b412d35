// The tokenizer beside an exported model: the SentencePiece model as `tokenizer.model` and
// `tokenizer_config.json` naming cabert's special ids and framing; and, on import, finding a SentencePiece
// model in a Hugging Face directory (or refusing a WordPiece / BPE-JSON vocabulary cabert cannot reproduce).
#pragma once

#include <string>

#include "lib/text/tokenizer.h"

namespace cabert::interop {

void write_tokenizer_files(const std::string& dir, const text::Tokenizer& tokenizer, int max_length);

// The SentencePiece model of `dir` (tokenizer.model, spiece.model, sentencepiece.bpe.model). Without one:
// DataError naming what the directory holds instead (vocab.txt: WordPiece; tokenizer.json: a tokenizers-library
// vocabulary) and that cabert tokenises with SentencePiece only; or naming the files it looked for.
std::string find_sentencepiece_model(const std::string& dir);

}  // namespace cabert::interop
