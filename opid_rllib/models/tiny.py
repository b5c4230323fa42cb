"""The tiny Qwen3 (~3M parameters) built in-process, byte-identical for a given seed.

Why: CPU tests need a model that builds in seconds and that `AutoModelForCausalLM`, our HF
backend and `vllm serve` all open like any checkpoint (head_dim 64: vLLM's CPU attention rejects
smaller heads).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from pathlib import Path

TINY_VERSION = "tiny-v1"
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Agent-format tags get one id each (like Qwen3's <think>); they are ordinary added tokens, so
# `skip_special_tokens=True` keeps them in decoded responses, which the projection needs.
TAG_TOKENS = ["<think>", "</think>", "<action>", "</action>", "<search>", "</search>",
              "<answer>", "</answer>", "<information>", "</information>"]
TINY_VOCAB_SIZE = 3072

TINY_CONFIG = dict(
    hidden_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
    head_dim=64, intermediate_size=512, max_position_embeddings=4096, tie_word_embeddings=True,
    rms_norm_eps=1e-6, rope_theta=1_000_000.0, hidden_act="silu", attention_bias=False,
)

# Qwen3-style template (our own text): enable_thinking=False pre-fills an empty think block,
# exactly like Qwen3's template, so a thinking-off prompt looks the same for tiny and Qwen3.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['content'] is string -%}{%- set text = message['content'] -%}"
    "{%- else -%}{%- set text = message['content'] | map(attribute='text') | join('') -%}{%- endif -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + text + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}"
    "{{- '<think>\\n\\n</think>\\n\\n' -}}"
    "{%- endif -%}"
    "{%- endif -%}"
)


# ---- tiny model -------------------------------------------------------------------------------
_VERBS = ["go to", "take", "from", "move", "to", "put", "in/on", "open", "close", "heat", "with",
          "cool", "clean", "use", "examine", "look", "inventory", "help", "slice", "toggle",
          "search", "click", "buy now", "next", "prev", "back to search", "description", "features"]

_PHRASES = [
    "You arrive at {r} 1. On the {r} 1, you see a {o} 1, and a {o} 2.",
    "The {r} 2 is closed. You open the {r} 2. In it, you see nothing.",
    "You pick up the {o} 1 from the {r} 1. You put the {o} 1 in/on the {r} 3.",
    "You heat the {o} 1 using the microwave 1. You cool the {o} 1 using the fridge 1.",
    "You clean the {o} 1 using the sinkbasin 1. Nothing happens. You are carrying: a {o} 1.",
    "Your task is to: put a clean {o} in {r}. Your task is to: find two {o} and put them in {r}.",
    "You are in the middle of a room. Looking quickly around you, you see a {r} 1, a {r} 2.",
    "-= Welcome to TextWorld, ALFRED! =-",
    "i need a {o} that is less than 30.00 dollars, price lower than 50.00 dollars, size large",
    "[SEP] Back to Search [SEP] Page 1 (Total results: 50) [SEP] Next > [SEP] B09ABC1234 [SEP] $19.99",
    "Your question: who wrote the novel and in which year was it published?",
    "Doc 1(Title: \"{o}\") The {o} is a household object found in the {r}.",
]

# General words for WebShop listings and search-QA passages (BPE gets whole-word merges for them).
_WORDS = """the a an of and or in on at to for from with by about as is are was were be been has have
had it its this that these those which who whom whose what when where why how not no yes all any
each every some many more most less least than then there here one two three four five six seven
eight nine ten first second third last next new old small medium large x-large size color black
white red blue green gray grey brown pink purple yellow orange silver gold men women kids baby
shoes shirt t-shirt dress pants jeans jacket coat socks hat bag watch phone case charger cable
headphones speaker laptop computer screen camera battery light lamp table chair bed sofa pillow
blanket towel soap shampoo lotion cream oil vitamin coffee tea water juice snack chocolate cookie
sugar free gluten organic natural vegan pack count ounce ounces oz lb pound inch inches cm mm ml
price dollars quality rating reviews product products item items results page search click buy
brand style fit cotton leather wood metal plastic glass steel wireless bluetooth usb portable
waterproof long short sleeve slim regular fashion comfortable gift set home kitchen bathroom office
outdoor travel year years born died city country state capital president king queen war film movie
song album band book novel author writer actor actress director series season episode team game
player football soccer basketball baseball league championship river mountain island ocean sea lake
university school college company founded founder located population largest smallest longest
language english french german spanish chinese japanese american british national international
world history family father mother son daughter wife husband name named known called also became
played won released published written directed produced created member part during after before
since until between against under over into through""".split()


def _alfworld_grammar_lines() -> list[str]:
    """Feedback sentences of the ALFWorld text grammar shipped in the (pinned) alfworld wheel. Missing, it would
    change the tiny model's corpus (and every cached tiny model's weights) silently, so it raises."""
    spec = importlib.util.find_spec("alfworld")
    if spec is None:
        raise ImportError("the tiny model's corpus reads the alfworld package's grammar; install alfworld (a base "
                          "dependency of opid-rllib)")
    text = (Path(list(spec.submodule_search_locations)[0]) / "data" / "alfred.twl2").read_text()
    return [m.replace("\\n", "\n") for m in re.findall(r'"rhs": "(.*?)"', text)]


def _tiny_corpus() -> list[str]:
    """Deterministic training text: ALFWorld names, verbs, env phrases, our prompt templates."""
    from opid_rllib.prompts import alfworld as p_alf, searchqa as p_sq, webshop as p_ws

    from alfworld.gen import constants as c  # a base dependency: without it the corpus would differ

    objects = sorted({o.lower() for o in c.OBJECTS})
    receptacles = sorted({r.lower() for r in c.RECEPTACLES})
    lines = [" ".join(objects), " ".join(receptacles), " ".join(_VERBS), " ".join(_WORDS),
             " ".join(w.capitalize() for w in _WORDS), " ".join(str(n) for n in range(200)),
             " ".join(f"${n}.{n % 100:02d}" for n in range(1, 100)), " ".join(str(y) for y in range(1900, 2031))]
    lines.extend(_alfworld_grammar_lines())
    for i, o in enumerate(objects):
        r = receptacles[i % len(receptacles)]
        lines.append(" ".join(f"{v} {o} {n} {r} {n}" for n in (1, 2, 3) for v in ("go to", "take", "put")))
        lines.extend(p.format(o=o, r=r) for p in _PHRASES)
    for mod in (p_alf, p_ws, p_sq):
        for name in sorted(vars(mod)):
            val = getattr(mod, name)
            if name.isupper() and isinstance(val, str):
                lines.extend([val] * 20)
    lines.append(" ".join(TAG_TOKENS))
    return lines


def _build_tokenizer(vocab_size: int = TINY_VOCAB_SIZE):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=1, show_progress=False, special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_tiny_corpus(), trainer=trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TAG_TOKENS])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE, clean_up_tokenization_spaces=False, model_max_length=4096,
    )


def build_tiny_model(out_dir, seed: int = 0) -> Path:
    """Write a ~3M-parameter Qwen3ForCausalLM + byte-level BPE tokenizer to `out_dir`.

    Same seed -> byte-identical safetensors and tokenizer files (tests hash them).
    """
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _build_tokenizer()
    eos_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config = Qwen3Config(vocab_size=len(tokenizer), bos_token_id=None, eos_token_id=eos_id,
                         pad_token_id=pad_id, **TINY_CONFIG)
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config).to(torch.float32).eval()
    model.generation_config = GenerationConfig(eos_token_id=eos_id, pad_token_id=pad_id)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


def _tiny_fingerprint() -> str:
    """Folder name suffix: changing the corpus (e.g. template wording) or config makes a new cache
    entry instead of silently reusing a stale tokenizer."""
    h = hashlib.sha256(json.dumps([TINY_CONFIG, TINY_VOCAB_SIZE, CHAT_TEMPLATE, TAG_TOKENS,
                                   _tiny_corpus()], sort_keys=True).encode())
    return h.hexdigest()[:8]
