"""The Python package's generation runner and function_for over the C API,
run by install_test.cc with Debian's python3 and python3-numpy:

    python3 python_generator_test.py HEXIR_COMPILE SAMPLES_DIR SCRATCH_DIR

with HEXIR_LIBRARY naming the libhexir_vm.so under test. Compiles
samples/decoder/lm.hxir (decode, prefill_4, prefill_8 with a donated KV
cache) and checks greedy generation against the numpy reference
(expected_tokens.npy), the prefill and token-by-token paths against the
decode function called step by step through a context, sampling from a
seed, eos, the stats and the errors. Prints one line per check and
"python generator: N passed, M failed"; exits 1 on any failure, 77 (skipped)
when numpy is missing."""

import os
import subprocess
import sys

from checks import check, finish, hexir, np  # noqa: E402

compile_tool, samples, scratch = sys.argv[1:4]


def expect_error(code, part, f, what):
    try:
        f()
    except hexir.Error as e:
        check(e.code == code and part in str(e), "%s: %s %s" % (what, e.code, e))
        return
    check(False, what + ": no error raised")


decoder = os.path.join(samples, "decoder")
hxe = os.path.join(scratch, "lm.hxe")
subprocess.run([compile_tool, os.path.join(decoder, "lm.hxir"), "-o", hxe], check=True, stdout=subprocess.DEVNULL)
prompt = np.load(os.path.join(decoder, "prompt.npy"))
expected = np.load(os.path.join(decoder, "expected_tokens.npy"))
program = hexir.load(hxe, threads=1)
check(program.memory["prepared_bytes"] > 0, "prepared_bytes %d" % program.memory["prepared_bytes"])

# function_for: by the shapes of arrays, or of Tensors of program.functions.
cache = np.zeros((2, 2, 2, 32, 16), np.float32)
check(program.function_for(np.zeros((1, 4), np.int64), cache).name == "prefill_4", "function_for: prefill_4")
decode = program.functions["decode"]
check(program.function_for(*decode.inputs).name == "decode", "function_for: decode's own Tensors")
expect_error("NOT_FOUND", "no function takes (i64[1,5], f32[2,2,2,32,16])",
             lambda: program.function_for(np.zeros((1, 5), np.int64), cache), "function_for: no fit")

ctx = program.context()
gen = ctx.generator(max_new_tokens=20)
check(gen.vocab_size == 64, "vocabulary 64")
check(gen.prefill_function(8) == "prefill_8" and gen.prefill_function(3) is None, "prefill functions by length")
tokens = gen.generate(prompt, max_new_tokens=20)
check(tokens.dtype == np.int64 and np.array_equal(tokens, expected), "greedy through prefill_8 = expected_tokens.npy")
stats = gen.stats
check(stats["prefill_function"] == "prefill_8" and stats["generated_tokens"] == 20 and stats["prompt_tokens"] == 8,
      "stats: %s" % {k: v for k, v in stats.items() if k != "token_ns"})
check(len(stats["token_ns"]) == 20 and stats["token_ns"][0] == stats["prefill_ns"] and stats["tokens_per_second"] > 0,
      "stats: per-token times")


# The reference: decode called step by step through a context, argmax fed back.
def by_steps(context, prompt_tokens, count):
    cache = np.zeros((2, 2, 2, 32, 16), np.float32)
    tokens, logits = [], []
    for step in range(len(prompt_tokens) + count - 1):
        token = prompt_tokens[step] if step < len(prompt_tokens) else tokens[-1]
        out = context("decode", input_ids=np.array([[token]], np.int64), pos=np.array(step, np.int64), cache=cache)
        if step + 1 >= len(prompt_tokens):
            logits.append(out["logits"].reshape(-1).copy())
            tokens.append(int(np.argmax(logits[-1])))
    return tokens, logits


reference_ctx = program.context()
for length in (4, 5):
    want_tokens, want_logits = by_steps(reference_ctx, prompt[:length], 10)
    seen = []
    got = gen.generate(prompt[:length], max_new_tokens=10, on_token=lambda i, t, l: seen.append((i, t, l)))
    check(list(got) == want_tokens, "prompt of %d (%s): tokens %s" % (length, gen.stats["prefill_function"], list(got)))
    check(len(seen) == 10 and all(np.allclose(l, w, atol=1e-5) for (_, _, l), w in zip(seen, want_logits)),
          "prompt of %d: every step's logits = decode step by step" % length)

by_token = ctx.generator(prefill=False, max_new_tokens=20)
check(np.array_equal(by_token.generate(prompt, 20), expected) and by_token.stats["prefill_function"] is None,
      "greedy token by token through decode = expected_tokens.npy")

sampled = ctx.generator(temperature=1.5, top_k=5, top_p=0.95, seed=42, max_new_tokens=20)
first, second = sampled.generate(prompt), sampled.generate(prompt)
check(np.array_equal(first, second) and not np.array_equal(first, expected), "sampling: the same seed, the same tokens")
sampled.set_sampling(temperature=1.5, top_k=5, top_p=0.95, seed=43)
check(not np.array_equal(sampled.generate(prompt), first), "sampling: another seed, other tokens")
stop = ctx.generator(eos_token=int(expected[3]), max_new_tokens=20)
at = int(np.argmax(expected == expected[3]))
check(len(stop.generate(prompt)) == at + 1, "eos: stops after it")
check(len(gen.generate(prompt, 20, on_token=lambda i, t, l: i < 2)) == 3, "on_token returning False stops")

expect_error("NOT_FOUND", "no function 'step'", lambda: ctx.generator(decode="step"), "unknown decode function")
expect_error("INVALID_ARGUMENT", "has no output 'scores' for the logits", lambda: ctx.generator(logits="scores"),
             "no logits output")
expect_error("INVALID_ARGUMENT", "made for 20", lambda: gen.generate(prompt, 21), "more tokens than made for")
expect_error("INVALID_ARGUMENT", "the prompt is empty", lambda: gen.generate([]), "empty prompt")
expect_error("INVALID_ARGUMENT", "outside the vocabulary of 64", lambda: gen.generate([1, 99]), "token outside")
expect_error("INVALID_ARGUMENT", "not token ids", lambda: gen.generate([1.5, 2.0]), "a float prompt")
check(ctx.generator(decode=0, max_new_tokens=4).generate([1, 2], 4).shape == (4,), "decode by index")

finish("python generator")
