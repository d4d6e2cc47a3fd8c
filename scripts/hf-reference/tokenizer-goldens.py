#!/usr/bin/env python3
# ===- scripts/hf-reference/tokenizer-goldens.py - HF tokenizer goldens ---===#
#
# Trains small tokenizers with Hugging Face `tokenizers` on the repository's
# embedded corpus (plus a few multilingual lines) and records what HF encodes
# and decodes for seeded, varied strings. dsc's tokenizer test
# (test/Text/TokenizerTest.cpp) asserts it reproduces every line; HF is the
# oracle, not a reading of its sources.
#
# Usage (any throw-away venv):
#   python3 -m venv /tmp/tok-venv && /tmp/tok-venv/bin/pip install tokenizers
#   /tmp/tok-venv/bin/python scripts/hf-reference/tokenizer-goldens.py
#
# Writes test/Text/Inputs/<name>.tokenizer.json and <name>.goldens.jsonl.gz:
# one JSON array a line, [text, ids, special_ids, dec, dec_skip,
# dec_special, dec_special_skip], where
#   ids          = encode(text, add_special_tokens=False).ids
#   special_ids  = encode(text, add_special_tokens=True).ids, or null when
#                  equal to ids
#   dec          = decode(ids, skip_special_tokens=False), null when == text
#   dec_skip     = decode(ids, skip_special_tokens=True), null when == dec
#   dec_special  = decode(special_ids, False), null when == dec
#   dec_special_skip = decode(special_ids, True), null when == dec_skip
# (nulls only say "same as"; the C++ test resolves them the same way).
# The files are gzip'd (the test inflates them with zlib).
#
# ===----------------------------------------------------------------------===#
import gzip
import json
import os
import random
import re
import sys
import unicodedata

import tokenizers
from tokenizers import (AddedToken, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, processors, trainers)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "test", "Text", "Inputs")
SPACE = "\u2581"  # ▁


def corpus_lines():
    """The embedded Alice corpus plus multilingual lines, so that merges
    exist over multi-byte UTF-8 (accents, CJK, emoji)."""
    path = os.path.join(ROOT, "lib", "Runtime", "Data", "DefaultCorpus.inc")
    text = open(path, encoding="utf-8").read()
    body = text.split('R"dsc_corpus(', 1)[1].rsplit(')dsc_corpus"', 1)[0]
    lines = [l for l in body.split("\n")]
    extra = [
        "Déjà vu: le café était fermé, l'élève a répondu « très bien ».",
        "Größe, Straße, Übermut und schöne Äpfel für München.",
        "El niño comió piñas en la mañana; ¿qué pasó después?",
        "Ça va? Où est la bibliothèque? Noël à l'hôpital.",
        "爱丽丝开始觉得很累，她坐在河岸边的姐姐身旁。",
        "不思議の国のアリス、ウサギの穴に落ちる。",
        "앨리스는 언니 옆에 앉아 있는 것이 지루해지기 시작했다.",
        "Привет, как дела? Алиса пошла за белым кроликом.",
        "Η Αλίκη στη χώρα των θαυμάτων.",
        "مرحبا بالعالم",
        "😀 😂 🐇 🎩 ❤️ 👍🏽 🇫🇷",
        "naïve coöperation façade jalapeño résumé",
    ]
    return lines + extra * 8


def byte_level_tokenizer():
    """GPT-NeoX-like: NFC, byte-level BPE, <|endoftext|>, and NeoX's
    normalized (non-special) whitespace added tokens."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                 use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=2000, show_progress=False,
        special_tokens=["<|endoftext|>", "<|padding|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus_lines(), trainer)
    tok.add_tokens([AddedToken(" " * 8, normalized=True),
                    AddedToken(" " * 4, normalized=True)])
    return tok


def llama_model_json():
    """Llama-like BPE trained with a Metaspace pre-tokenizer, then given
    Llama's 256 <0xNN> byte tokens at ids 3..258 (as sentencepiece
    conversions have them) and saved as JSON."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True,
                               fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE,
                                                 prepend_scheme="always",
                                                 split=True)
    trainer = trainers.BpeTrainer(vocab_size=2000 - 256, show_progress=False,
                                  special_tokens=["<unk>", "<s>", "</s>"])
    tok.train_from_iterator(corpus_lines(), trainer)
    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    shifted = {}
    for token, i in vocab.items():
        shifted[token] = i if i < 3 else i + 256
    for b in range(256):
        shifted["<0x%02X>" % b] = 3 + b
    data["model"]["vocab"] = dict(sorted(shifted.items(), key=lambda kv: kv[1]))
    for added in data["added_tokens"]:
        assert added["id"] < 3
    return data


LLAMA_DECODER = {
    "type": "Sequence",
    "decoders": [
        {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
        {"type": "ByteFallback"},
        {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0},
    ],
}


def llama_template(data):
    data["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                   {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "<s>", "type_id": 1}},
                 {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}},
    }


def llama_tokenizers(base):
    """Three spellings of the Llama family over one trained model."""
    out = {}
    # Llama 2 / Mistral (tokenizers < 0.19 conversions): the normalizer
    # prepends and replaces, no pre-tokenizer.
    d = json.loads(json.dumps(base))
    d["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": SPACE},
        {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}]}
    d["pre_tokenizer"] = None
    d["decoder"] = LLAMA_DECODER
    llama_template(d)
    out["llama"] = d
    # Newer conversions (legacy=False): Metaspace prepends only at the start
    # of the input.
    d = json.loads(json.dumps(base))
    d["normalizer"] = None
    d["pre_tokenizer"] = {"type": "Metaspace", "replacement": SPACE,
                          "prepend_scheme": "first", "split": False}
    d["decoder"] = LLAMA_DECODER
    llama_template(d)
    out["llama-metaspace"] = d
    # No byte fallback: unknown characters fuse into <unk>; the Metaspace
    # decoder; a pre-tokenizer that splits words.
    d = json.loads(json.dumps(base))
    d["model"]["byte_fallback"] = False
    d["normalizer"] = None
    d["pre_tokenizer"] = {"type": "Metaspace", "replacement": SPACE,
                          "prepend_scheme": "always", "split": True}
    d["decoder"] = {"type": "Metaspace", "replacement": SPACE,
                    "prepend_scheme": "always", "split": True}
    out["llama-unk"] = d
    return {k: Tokenizer.from_str(json.dumps(v)) for k, v in out.items()}


def options_tokenizer(neox):
    """The byte-level model with the options the two families do not use
    but tokenizer.json files do: NFKC, add_prefix_space, ignore_merges,
    added tokens with lstrip / rstrip / single_word / normalized, and a
    Sequence post-processor whose template wraps the text in
    <|endoftext|>."""
    d = json.loads(neox.to_str())
    d["normalizer"] = {"type": "Sequence",
                       "normalizers": [{"type": "NFKC"}]}
    d["pre_tokenizer"]["add_prefix_space"] = True
    d["model"]["ignore_merges"] = True
    d["added_tokens"] = d["added_tokens"][:2]
    d["post_processor"] = {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
         "use_regex": True},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                    {"Sequence": {"id": "A", "type_id": 0}},
                    {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
         "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                  {"Sequence": {"id": "B", "type_id": 1}}],
         "special_tokens": {"<|endoftext|>": {
             "id": "<|endoftext|>", "ids": [0], "tokens": ["<|endoftext|>"]}}}]}
    tok = Tokenizer.from_str(json.dumps(d))
    tok.add_special_tokens([AddedToken("[MASK]", lstrip=True)])
    tok.add_special_tokens([AddedToken("<sep>", rstrip=True)])
    tok.add_tokens([AddedToken("hello", single_word=True, normalized=True)])
    tok.add_tokens([AddedToken("Ｗorld", normalized=True)])  # NFKC: World
    tok.add_tokens([AddedToken("[raw]", normalized=False,
                               lstrip=True, rstrip=True)])
    return tok


OPTION_PIECES = ["[MASK]", " [MASK]", "  [MASK] ", "\t[MASK]", "<sep>",
                 "<sep>  x", "<sep>\n", "hello", "hellohello", " hello,",
                 "xhello", "hello_", "héllo", "hello\u0301", "World",
                 "\uff37orld", "Worlds", "[raw]", "  [raw]  ", "ﬁne", "²",
                 "[MASK][MASK]", "<sep><sep>"]


def option_strings(count, seed):
    rng = random.Random(seed)
    out = []
    for s in make_strings(count, seed):
        for _ in range(rng.randint(0, 3)):
            at = rng.randint(0, len(s))
            s = s[:at] + rng.choice(OPTION_PIECES) + s[at:]
        out.append(s)
    return out


# ---------------------------------------------------------------------------
# Strings.

WORDS = None


def fragment(rng):
    global WORDS
    if WORDS is None:
        WORDS = sorted(set(re.findall(r"[A-Za-z]+", " ".join(corpus_lines()))))
    kind = rng.randrange(22)
    if kind <= 4:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 5)))
    if kind == 5:
        return "".join(rng.choice("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
                       for _ in range(rng.randint(1, 6)))
    if kind == 6:
        return str(rng.randrange(10 ** rng.randint(1, 15)))
    if kind == 7:
        return rng.choice(WORDS) + rng.choice(
            ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "’s",
             "'", "''", "'x"])
    if kind == 8:
        return rng.choice(["café", "naïve", "Ångström", "Zoë", "façade",
                           "jalapeño", "Øresund", "Łódź", "İstanbul", "ß",
                           "ÉCOLE", "œuvre", "Ďakujem", "Ĳssel"])
    if kind == 9:  # combining sequences NFC composes (or reorders)
        return rng.choice(["e\u0301", "A\u030a", "\u212b", "\u2126",
                           "o\u0308\u0304", "a\u0328\u0301", "\u1100\u1161\u11a8",
                           "q\u0307\u0323", "\u0344", "n\u0303o", "\u00c5\u0301",
                           "\u0958", "\u1e9b\u0323", "\u0041\u0300\u0301",
                           "\ufb01", "\u00bd", "e\u0300\u0300", "\u0301"])
    if kind == 10:
        return rng.choice(["爱丽丝", "兔子洞", "不思議の国", "カタカナ", "ひらがな",
                           "한국어", "앨리스", "中文字符测试", "𠀋𠂢", "漢字"])
    if kind == 11:
        return rng.choice(["😀", "🐇", "👍🏽", "🇫🇷", "👨‍👩‍👧", "❤️", "🎩",
                           "🤖🤖", "✨", "\U0001f9ec", "☃", "⌘"])
    if kind == 12:
        return rng.choice(["<|endoftext|>", "<|padding|>", "<s>", "</s>",
                           "<unk>", "<|endoftext", "<s", "<<s>>", "</s></s>",
                           "<|endoftext|><|endoftext|>", " <s> ", "<unk><unk>"])
    if kind == 13:
        return rng.choice(["", " ", "  ", "   ", "    ", "     ", " " * 9,
                           " " * rng.randint(10, 40), "\t", "\n", "\n\n",
                           "\r\n", " \n ", "\t\t  ", "\u00a0", "\u3000",
                           "\u2009", "\u0085", "\u2028", "\x0b", "\x0c",
                           "\x1c", "\x1f", "\u200b", "\ufeff", "\u180e",
                           "\u2002 \u2003", "\u202f", "\u205f"])
    if kind == 14:
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz")
                       for _ in range(rng.randint(20, 120)))
    if kind == 15:
        return rng.choice(["٣٤٥", "１２３", "²³", "Ⅻ", "½", "४२", "߁", "⑦",
                           "x²", "3.14", "1,000,000", "v2.0-rc1", "0x1F"])
    if kind == 16:
        return rng.choice(["Привет", "Ελλάδα", "مرحبا", "שלום", "नमस्ते",
                           "ภาษาไทย", "Հայերեն", "ქართული", "𝐀𝐁𝐂", "ꙮ"])
    if kind == 17:  # control and odd code points (byte fallback territory)
        return "".join(chr(rng.choice([0, 1, 7, 8, 0x1b, 0x7f, 0x80, 0x9f,
                                       0xad, 0xe000, 0xf8ff, 0xfffd, 0xfffc,
                                       0x10ffff, 0xe0001, 0x1d173, 0x2060]))
                       for _ in range(rng.randint(1, 3)))
    if kind == 18:  # random code points from assigned blocks
        ranges = [(0x20, 0x7e), (0xa0, 0x24f), (0x370, 0x3ff), (0x400, 0x4ff),
                  (0x590, 0x5ff), (0x600, 0x6ff), (0x900, 0x97f),
                  (0x3040, 0x30ff), (0x4e00, 0x4fff), (0xac00, 0xad00),
                  (0x1f300, 0x1f5ff), (0x2000, 0x206f), (0x2190, 0x22ff),
                  (0x300, 0x36f)]
        out = []
        for _ in range(rng.randint(1, 6)):
            lo, hi = rng.choice(ranges)
            out.append(chr(rng.randint(lo, hi)))
        return "".join(out)
    if kind == 19:
        return rng.choice(corpus_lines())[:40]
    if kind == 20:
        return rng.choice(["hello world", "Hello World", "HELLO", "don't",
                           "I'm", "we'll", "they're", "it's", "Mr. Smith",
                           "e-mail", "C++", "foo_bar", "a\tb", "x  y",
                           "end.", "(parenthesis)", "\"quoted\""])
    return rng.choice(WORDS).upper()


SEPARATORS = [" ", " ", " ", "", "  ", "\n", "\t", ", ", ". ", "   ", "\n\n",
              " \t", "\r\n", "\u00a0"]


def make_strings(count, seed):
    rng = random.Random(seed)
    out = ["", " ", "a", "<s>", "</s>", "<unk>", "<|endoftext|>",
           "Hello <s> world", "a<s>b", "  <s>  ", "<s><s>", "hello    world",
           "x" * 3000, " " * 100, "e\u0301<|endoftext|>\u0301",
           "\U0001F600" * 20, "\u0301\u0301", "It's   fine.\n\n\tYes."]
    while len(out) < count:
        n = rng.choice([1, 1, 1, 2, 2, 3, 4])
        parts = [fragment(rng) for _ in range(n)]
        s = parts[0]
        for p in parts[1:]:
            s += rng.choice(SEPARATORS) + p
        if rng.random() < 0.1:
            s = " " + s
        if rng.random() < 0.1:
            s = s + rng.choice([" ", "\n", "  "])
        out.append(s)
    return out[:count]


def goldens(tok, strings):
    lines = []
    for s in strings:
        e = tok.encode(s, add_special_tokens=False).ids
        es = tok.encode(s, add_special_tokens=True).ids
        d = tok.decode(e, skip_special_tokens=False)
        dk = tok.decode(e, skip_special_tokens=True)
        ds = tok.decode(es, skip_special_tokens=False)
        dsk = tok.decode(es, skip_special_tokens=True)
        rec = [s, e, None if es == e else es, None if d == s else d,
               None if dk == d else dk, None if ds == d else ds,
               None if dsk == dk else dsk]
        while rec and rec[-1] is None:
            rec.pop()
        lines.append(json.dumps(rec, ensure_ascii=False, separators=(",", ":")))
    return "\n".join(lines) + "\n"


def main():
    os.makedirs(OUT, exist_ok=True)
    toks = {"neox": byte_level_tokenizer()}
    toks.update(llama_tokenizers(llama_model_json()))
    toks["options"] = options_tokenizer(toks["neox"])
    counts = {"neox": 10000, "llama": 10000, "llama-metaspace": 2000,
              "llama-unk": 2000, "options": 3000}
    for name, tok in toks.items():
        # The goldens come from the file as saved: what dsc reads.
        tok = Tokenizer.from_str(tok.to_str())
        with open(os.path.join(OUT, name + ".tokenizer.json"), "w",
                  encoding="utf-8") as f:
            f.write(tok.to_str(pretty=False))
            f.write("\n")
        make = option_strings if name == "options" else make_strings
        text = goldens(tok, make(counts[name], seed=20261203))
        path = os.path.join(OUT, name + ".goldens.jsonl.gz")
        # mtime=0: the same input gives the same bytes.
        with open(path, "wb") as f:
            f.write(gzip.compress(text.encode("utf-8"), 9, mtime=0))
        print(f"{name}: {counts[name]} strings, vocab "
              f"{tok.get_vocab_size()}, {os.path.getsize(path)} bytes "
              f"(tokenizers {tokenizers.__version__})")


if __name__ == "__main__":
    sys.exit(main())
