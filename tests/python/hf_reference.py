"""Hugging Face transformers as the independent reference for `cabert export` (tests/unit/interop/).

  make DIR TOKENIZER     builds BERT, ConvBERT and ELECTRA (discriminator, E = H masked LM) models with random weights in DIR/<name>/ (save_pretrained,
                         the tokenizer copied in as tokenizer.model) and their outputs on fixed ids in
                         DIR/<name>/reference.safetensors, for the import test.
  compare CASES.json     loads each export with transformers' own class (or, for a case with "remote_code", an
                         Auto class with trust_remote_code=True: the modeling_cabert.py cabert wrote beside it) and
                         compares its outputs with the ones cabert computed (a safetensors file per case) to 1e-4
                         or the case's tolerance; an encoder-decoder ("seq2seq") also compares generate()'s greedy
                         ids with cabert's greedy search's. Also asserts that loading found every weight and no
                         stray one. Prints one line per case; exits 1 on any mismatch.
"""
import json
import shutil
import sys
import types

import torch
import transformers
from safetensors.torch import load_file, save_file

TOLERANCE = 1e-4


def randomise(model, seed):
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator) * 0.1
            if name.endswith("LayerNorm.weight"):
                parameter.copy_(1 + noise)
            else:
                parameter.copy_(noise)


def fixed_inputs(vocab, batch=2, length=12, seed=7):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (batch, length), generator=generator)
    ids[:, 0] = 2
    ids[:, -1] = 3
    segments = torch.zeros_like(ids)
    segments[:, length // 2:] = 1
    return ids, segments, torch.ones_like(ids)


def make(directory, tokenizer):
    common = dict(vocab_size=600, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                  max_position_embeddings=64, type_vocab_size=2, pad_token_id=0)
    models = {
        "bert": transformers.BertForMaskedLM(transformers.BertConfig(**common)),
        "convbert": transformers.ConvBertForMaskedLM(transformers.ConvBertConfig(
            **common, embedding_size=16, head_ratio=2, conv_kernel_size=5, num_groups=2)),
        "electra": transformers.ElectraForPreTraining(transformers.ElectraConfig(**common, embedding_size=16)),
        # E = H: BERT's maths under ELECTRA's names (the import keeps them).
        "electra-mlm": transformers.ElectraForMaskedLM(transformers.ElectraConfig(**common, embedding_size=32)),
    }
    for seed, (name, model) in enumerate(models.items()):
        randomise(model, seed + 1)
        model.eval()
        target = f"{directory}/{name}"
        model.save_pretrained(target)
        shutil.copy(tokenizer, f"{target}/tokenizer.model")
        ids, segments, mask = fixed_inputs(600)
        with torch.no_grad():
            out = model(input_ids=ids, token_type_ids=segments, attention_mask=mask, output_hidden_states=True)
        save_file({"input_ids": ids, "token_type_ids": segments, "attention_mask": mask,
                   "hidden": out.hidden_states[-1].contiguous(), "logits": out.logits.contiguous()},
                  f"{target}/reference.safetensors")
        print(name, "made")


def tanh_pooler(model):
    head = model.classifier
    head.forward = types.MethodType(lambda self, h, **kw: self.out_proj(torch.tanh(self.dense(h[:, 0]))), head)


def compare_case(case):
    cls = getattr(transformers, case["class"])
    if case.get("remote_code"):  # cabert's own modelling code beside the weights (modeling_cabert.py)
        model, info = cls.from_pretrained(case["dir"], output_loading_info=True, trust_remote_code=True)
        if type(model).__module__.split(".")[-1] != "modeling_cabert":
            print(f"{case['name']}: {case['class']} FAIL loaded {type(model)}, not modeling_cabert's")
            return False
    else:
        model, info = cls.from_pretrained(case["dir"], output_loading_info=True, attn_implementation="eager")
    model.eval()
    # A base model loaded from a directory with a head leaves the head's tensors unused, as transformers' own
    # classes do; the case names the prefixes it may leave ("unused_prefixes"), any other stray tensor fails.
    unused = tuple(case.get("unused_prefixes", ()))
    info["unexpected_keys"] = {key for key in info["unexpected_keys"] if not (unused and key.startswith(unused))}
    problems = [f"{key}: {info[key]}" for key in ("missing_keys", "unexpected_keys", "mismatched_keys") if info[key]]
    if case.get("tanh_pooler"):
        tanh_pooler(model)
    if case.get("seq2seq"):
        errors, note = compare_seq2seq(case, model, problems)
        return report(case, errors, problems, note)
    expected = load_file(case["outputs"])
    mask = expected["attention_mask"]
    with torch.no_grad():
        out = model(input_ids=expected["input_ids"], token_type_ids=expected["token_type_ids"], attention_mask=mask,
                    output_hidden_states=True)
    real = mask.bool()
    errors = {}
    if "hidden" in expected:
        errors["hidden"] = (out.hidden_states[-1][real] - expected["hidden"][real]).abs().max().item()
    if "logits" in expected:
        got = out.logits
        if got.dim() >= 2 and got.shape[:2] == mask.shape:
            got, want = got[real], expected["logits"][real]
        else:
            want = expected["logits"]
        errors["logits"] = (got - want).abs().max().item()
    if "discriminator_logits" in expected:
        errors["logits"] = (out.logits[real] - expected["discriminator_logits"][real]).abs().max().item()
    if "start_logits" in expected:
        errors["start_logits"] = (out.start_logits[real] - expected["start_logits"][real]).abs().max().item()
        errors["end_logits"] = (out.end_logits[real] - expected["end_logits"][real]).abs().max().item()
    return report(case, errors, problems)


def report(case, errors, problems, note=""):
    """Prints the case's line (its errors, then ok or FAIL and why); True when it passed."""
    for key, error in errors.items():
        if not error <= case.get("tolerance", TOLERANCE):
            problems.append(f"{key} differs by {error:.3g}")
    summary = " ".join([f"{key}={error:.2e}" for key, error in errors.items()] + ([note] if note else []))
    status = "ok" if not problems else "FAIL " + "; ".join(problems)
    print(f"{case['name']}: {case['class']} {summary} {status}")
    return not problems


def first_rows(tokens, eos=3):
    """[B, L] generated ids -> one list per row, up to and including its first EOS (padding after it dropped)."""
    rows = []
    for row in tokens.tolist():
        rows.append(row[:row.index(eos) + 1] if eos in row else row)
    return rows


def compare_seq2seq(case, model, problems):
    """An encoder-decoder: the encoder output and the teacher-forced logits at the real positions, and the ids
    generate() gives (greedy) against the ones cabert's greedy search gave."""
    expected = load_file(case["outputs"])
    source_mask, target_mask = expected["attention_mask"], expected["decoder_attention_mask"]
    with torch.no_grad():
        out = model(input_ids=expected["input_ids"], attention_mask=source_mask,
                    decoder_input_ids=expected["decoder_input_ids"], decoder_attention_mask=target_mask)
        generated = model.generate(input_ids=expected["input_ids"], attention_mask=source_mask,
                                   max_new_tokens=case["max_new_tokens"])
    errors = {
        "memory": (out.encoder_last_hidden_state[source_mask.bool()] - expected["memory"][source_mask.bool()])
        .abs().max().item(),
        "logits": (out.logits[target_mask.bool()] - expected["logits"][target_mask.bool()]).abs().max().item(),
    }
    if not torch.all(generated[:, 0] == 2):
        problems.append("generate did not start with the decoder start token 2")
    got, want = first_rows(generated[:, 1:]), first_rows(expected["generated"])
    if got != want:
        problems.append(f"generated {got}, cabert's greedy search {want}")
    return errors, f"generated={sum(len(r) for r in want)} tokens " + ("equal" if got == want else "differ")


def compare(cases_path):
    with open(cases_path) as f:
        cases = json.load(f)
    results = [compare_case(case) for case in cases]
    return 0 if all(results) else 1


if __name__ == "__main__":
    torch.manual_seed(0)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    if sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3])
        sys.exit(0)
    sys.exit(compare(sys.argv[2]))
