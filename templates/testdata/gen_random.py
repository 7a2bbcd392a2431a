"""Differential stress corpus: random conversations for the 17 fixture
templates, rendered by jinja2 as transformers configures it.

    python3 templates/testdata/gen_random.py N SEED OUT.jsonl.gz [FIXTURES_DIR]
    TEMPLATES_DIFF_FILE=OUT.jsonl.gz go test -run TestRandomDiff ./templates/

Not part of the committed test data (it is large); TestRandomDiff skips
without TEMPLATES_DIFF_FILE.
"""
import copy
import gzip
import io
import json
import os
import random
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(__file__))
from jinjaref import render  # noqa: E402

n, seed, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
here = os.path.dirname(os.path.abspath(__file__))
fixtures = sys.argv[4] if len(sys.argv) > 4 else os.environ.get("TROUPE_FIXTURES") or os.path.join(here, "..", "..", "..", "shared", "fixtures")
tdir = os.path.join(fixtures, "templates")
registry = json.load(open(os.path.join(tdir, "templates.json")))["templates"]
sources = {k: open(os.path.join(tdir, v["file"]), encoding="utf-8").read() for k, v in registry.items()}
rng = random.Random(seed)

PIECES = ["hello", " ", "  ", "\n", "\n\n", "\t", "<think>", "</think>", "<tool_response>", "</tool_response>", "é", "日本", "😀",
          "'", '"', "\\", "{{ x }}", "{% if %}", "<|im_end|>", "[INST]", "\u2028", "\x01", "0", "1.0", "a b", "<|channel|>analysis<|message|>"]


def text():
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 6)))


def scalar():
    return rng.choice([rng.randint(-5, 300), rng.choice([0.0, 1.0, -2.5, 1e21, 1e-7, 3.14159, 100.0]), True, False, None, text(), 2**70])


def value(depth=0):
    r = rng.random()
    if depth > 2 or r < 0.5:
        return scalar()
    if r < 0.75:
        return [value(depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(["a", "z", "k", "type", "items", "name", "x y"]) + str(i): value(depth + 1) for i in range(rng.randint(0, 3))}


def schema(depth=0):
    t = rng.choice(["string", "number", "integer", "boolean", "array", "object", ["string", "null"], ["integer", "string", "null"], None])
    s = {} if t is None else {"type": t}
    if rng.random() < 0.8:
        s["description"] = text()
    if t is None and rng.random() < 0.5:
        s["oneOf"] = [schema(depth + 1) for _ in range(rng.randint(1, 2))]
    if t == "object" and rng.random() < 0.2:
        s["additionalProperties"] = schema(depth + 1)
    if t == "array" and rng.random() < 0.2:
        s["items"] = {"type": rng.choice(["string", "number", "integer", "boolean", "object"])}
    if t == "array" and depth < 2:
        s["items"] = schema(depth + 1)
    if t == "object" and depth < 2 and rng.random() < 0.5:
        s["properties"] = {f"p{i}": schema(depth + 1) for i in range(rng.randint(0, 2))}
    if t == "string" and rng.random() < 0.3:
        s["enum"] = ["a", "b"]
    if rng.random() < 0.2:
        s["default"] = scalar()
    if rng.random() < 0.1:
        s["nullable"] = True
    return s


def tool():
    props = {f"arg{i}": schema() for i in range(rng.randint(0, 3))}
    f = {"name": rng.choice(["get_weather", "search", "f"]), "description": text() or "d",
         "parameters": {"type": "object", "properties": props, "required": list(props)[:1]}}
    if rng.random() < 0.15:
        f["return"] = {"type": "string", "description": text()}
    if rng.random() < 0.1:
        del f["parameters"]["required"]
    return {"type": "function", "function": f}


def call():
    args = {f"arg{i}": value() for i in range(rng.randint(0, 3))}
    if rng.random() < 0.3:
        args = json.dumps(args)
    cid = rng.choice(["abc123DEF", "call_" + "x" * rng.randint(1, 30), "123456789"])
    c = {"id": cid, "type": "function", "function": {"name": rng.choice(["get_weather", "search", "f"]), "arguments": args}}
    return c


def message(role):
    m = {"role": role}
    if role == "assistant":
        r = rng.random()
        if r < 0.3:
            m["content"] = None if rng.random() < 0.5 else text()
            m["tool_calls"] = [call() for _ in range(rng.randint(1, 2))]
        else:
            m["content"] = text()
        if rng.random() < 0.2:
            m["reasoning_content"] = text()
        if rng.random() < 0.1:
            m["thinking"] = text()
    elif role == "tool":
        m["tool_call_id"] = "abc123DEF"
        m["content"] = text() if rng.random() < 0.8 else value()
    else:
        r = rng.random()
        if r < 0.85:
            m["content"] = text()
        elif r < 0.93:
            m["content"] = [{"type": rng.choice(["text", "image", "image_url"]), "text": text()}]
        elif r < 0.97:
            m["content"] = None
        else:
            m["content"] = value()
    if rng.random() < 0.3:  # key order varies
        m = dict(reversed(list(m.items())))
    return m


def conversation():
    msgs = []
    if rng.random() < 0.4:
        msgs.append(message("system"))
    for _ in range(rng.randint(1, 6)):
        msgs.append(message("user"))
        if rng.random() < 0.8:
            a = message("assistant")
            msgs.append(a)
            if "tool_calls" in a and rng.random() < 0.8:
                msgs.append(message("tool"))
                if rng.random() < 0.5:
                    msgs.append(message("assistant"))
    if rng.random() < 0.1:
        msgs.append(message(rng.choice(["system", "developer", "assistant"])))
    return msgs


KW = [{}, {"enable_thinking": False}, {"enable_thinking": True}, {"thinking": True}, {"reasoning_effort": "high"},
      {"builtin_tools": ["browser", "python"]}, {"tools_in_user_message": False}, {"date_string": "1 Feb 2025"}, {"model_identity": "X"}]

with open(out, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz, io.TextIOWrapper(gz, encoding="utf-8") as f:
    for i in range(n):
        msgs = conversation()
        tools = [tool() for _ in range(rng.randint(1, 3))] if rng.random() < 0.5 else None
        docs = [{"doc_id": j, "title": text(), "text": text()} for j in range(rng.randint(1, 2))] if rng.random() < 0.1 else None
        kwargs = rng.choice(KW)
        name = rng.choice(sorted(sources))
        st = registry[name]["special_tokens"]
        agp = rng.random() < 0.7
        inputs = json.loads(json.dumps({"messages": msgs, "tools": tools, "documents": docs, "add_generation_prompt": agp, "special_tokens": st, "kwargs": kwargs}))
        variables = dict(messages=copy.deepcopy(inputs["messages"]), tools=inputs["tools"], documents=inputs["documents"], add_generation_prompt=agp, **{**st, **kwargs})
        rec = {"id": f"{name}/random{i}", "template": name, "inputs": inputs}
        rec.update(render(sources[name], variables))
        f.write(json.dumps(rec, ensure_ascii=False) + "\n")
print(n, "records")
