"""Writes conversations.jsonl.gz: more conversations for the 17 fixture
templates (../shared/fixtures/templates), rendered by jinja2 configured as
transformers configures it, in the record format of the fixtures'
cases.jsonl (id, template, inputs, expected | expected_error,
history_boundary without token facts).

    python3 templates/testdata/gen_conversations.py [FIXTURES_DIR]
"""
import copy
import gzip
import io
import json
import os
import sys

sys.dont_write_bytecode = True

sys.path.insert(0, os.path.dirname(__file__))
from jinjaref import ENV, render  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
fixtures = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TROUPE_FIXTURES") or os.path.join(here, "..", "..", "..", "shared", "fixtures")
tdir = os.path.join(fixtures, "templates")
registry = json.load(open(os.path.join(tdir, "templates.json")))["templates"]

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.",
           "parameters": {"type": "object", "properties": {
               "city": {"type": "string", "description": "City name, e.g. Paris"},
               "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit", "default": "celsius"},
               "days": {"type": "integer", "description": "Forecast days", "default": 1}},
               "required": ["city"]}}}
SEARCH = {"type": "function", "function": {"name": "search", "description": "Search the web; returns results \"as is\".",
          "parameters": {"type": "object", "properties": {
              "query": {"type": "string", "description": "Query text"},
              "filters": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}, "v": {"type": "number"}}}, "description": "Filters"},
              "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags"},
              "mode": {"oneOf": [{"type": "string", "description": "named"}, {"type": "integer"}], "description": "Mode"},
              "limit": {"type": ["integer", "null"], "description": "Max results", "nullable": True},
              "ratio": {"type": "number", "description": "Ratio", "default": 0.5},
              "opts": {"type": "object", "additionalProperties": {"type": "boolean"}, "description": "Options"}},
              "required": ["query", "tags"]},
          "return": {"type": "object", "description": "Search results"}}}
NOPARAM = {"type": "function", "function": {"name": "now", "description": "Current time.", "parameters": {"type": "object", "properties": {}}}}
TOOLS = [WEATHER, SEARCH]


def tc(id, name, args):
    return {"id": id, "type": "function", "function": {"name": name, "arguments": args}}


U = lambda c: {"role": "user", "content": c}  # noqa: E731
A = lambda c: {"role": "assistant", "content": c}  # noqa: E731
S = lambda c: {"role": "system", "content": c}  # noqa: E731

CONVS = {}  # id -> (messages, extra) ; extra: tools, documents, kwargs, agp

CONVS["float_args"] = ([U("Weather?"), {"role": "assistant", "content": None, "tool_calls": [tc("call00001", "get_weather", {"city": "Paris", "temperature": 1.0, "count": 3, "ratio": 0.5, "big": 1e21, "neg": -2.5, "tiny": 1e-7})]},
                        {"role": "tool", "tool_call_id": "call00001", "content": "{\"temp\": 21.0}"}, A("It is 21.0 degrees.")], {"tools": TOOLS})
CONVS["key_order"] = ([U("Go"), {"role": "assistant", "content": "", "tool_calls": [tc("abcdefghi", "search", {"z": 1, "a": {"y": [3, 2.0], "b": None}, "m": True})]},
                       {"role": "tool", "tool_call_id": "abcdefghi", "content": "ok"}], {"tools": [SEARCH, WEATHER]})
CONVS["long_openai_id"] = ([U("Weather in Rome?"), {"role": "assistant", "content": None, "tool_calls": [tc("call_Xy12AbC34dEf56GhI78jKl90", "get_weather", {"city": "Rome"})]},
                            {"role": "tool", "tool_call_id": "call_Xy12AbC34dEf56GhI78jKl90", "content": "sunny"}, A("Sunny."), U("Thanks")], {"tools": TOOLS})
CONVS["str_args_floats"] = ([U("Weather?"), {"role": "assistant", "content": None, "tool_calls": [tc("AAAAAAAAA", "get_weather", "{\"city\": \"Oslo\", \"days\": 2.0}")]},
                             {"role": "tool", "tool_call_id": "AAAAAAAAA", "content": "cold"}], {"tools": TOOLS})
CONVS["content_and_calls"] = ([S("Use tools."), U("Weather in Paris and Rome?"), {"role": "assistant", "content": "Let me check.", "tool_calls": [tc("id0000001", "get_weather", {"city": "Paris"})]},
                               {"role": "tool", "tool_call_id": "id0000001", "content": "rain"}, A("Paris: rain."), U("And Rome?")], {"tools": TOOLS})
CONVS["two_tool_results"] = ([U("Both"), {"role": "assistant", "content": None, "tool_calls": [tc("id0000001", "get_weather", {"city": "A"})]},
                              {"role": "tool", "tool_call_id": "id0000001", "content": "x"}, {"role": "tool", "tool_call_id": "id0000001", "content": "y"}], {"tools": TOOLS})
CONVS["ends_with_tool"] = ([U("Q"), {"role": "assistant", "content": None, "tool_calls": [tc("id0000002", "now", {})]}, {"role": "tool", "tool_call_id": "id0000002", "content": "12:00"}], {"tools": [NOPARAM]})
CONVS["tool_dict_content"] = ([U("Q"), {"role": "assistant", "content": None, "tool_calls": [tc("id0000003", "get_weather", {"city": "B"})]},
                               {"role": "tool", "tool_call_id": "id0000003", "content": {"temp": 3.0, "sky": "clear"}}, A("3.0 and clear")], {"tools": TOOLS})
CONVS["reasoning_multi"] = ([S("Think."), U("1+1?"), {"role": "assistant", "content": "2", "reasoning_content": "Add ones."}, U("2+2?"),
                             {"role": "assistant", "content": "4", "reasoning_content": "\nAdd twos.\n"}, U("3+3?")], {})
CONVS["think_tags_multi"] = ([U("a?"), A("<think>\nfirst\n</think>\n\nA1"), U("b?"), A("<think>second</think>B2"), U("c?")], {})
CONVS["think_last_assistant"] = ([U("a?"), A("<think>\nr\n</think>\n\nfinal")], {"agp": False})
CONVS["unicode_specials"] = ([S("Système: « réponds » \\ \"quotes\" 'single' \t tab"), U("日本語 😀 \u2028 line\\sep </s> <|im_end|>"), A("Ответ: ✓ & < >")], {})
CONVS["whitespace"] = ([S("  padded system  \n"), U("\n\n  spaced user \n "), A("  spaced answer\n\n"), U("\tlast\t")], {})
CONVS["empty_assistant"] = ([U("Say nothing"), A(""), U("Now say hi")], {})
CONVS["none_content_assistant"] = ([U("x"), {"role": "assistant", "content": None}, U("y")], {})
CONVS["consecutive_assistants"] = ([U("Hi"), A("One."), A("Two."), U("Ok")], {})
CONVS["system_middle"] = ([U("Hi"), A("Hello"), S("New instructions."), U("Go on")], {})
CONVS["two_systems"] = ([S("First."), S("Second."), U("Hi")], {})
CONVS["developer_role"] = ([{"role": "developer", "content": "Dev instructions."}, U("Hi")], {})
CONVS["gptoss_thinking"] = ([U("Q1"), {"role": "assistant", "content": "A1", "thinking": "T1"}, U("Q2"), {"role": "assistant", "content": "A2", "thinking": "T2"}], {"agp": False})
CONVS["gptoss_tool_thinking"] = ([U("W?"), {"role": "assistant", "thinking": "need weather", "tool_calls": [tc("id0000004", "get_weather", {"city": "C"})]},
                                  {"role": "tool", "tool_call_id": "id0000004", "content": "hot"}, A("Hot.")], {"tools": TOOLS})
CONVS["long_20_turns"] = ([S("You are terse.")] + [m for i in range(20) for m in (U(f"Question {i}: what is {i} squared?"), A(f"{i*i}"))] + [U("Done?")], {"tools": TOOLS})
CONVS["documents"] = ([U("Summarize the docs.")], {"documents": [{"doc_id": 1, "title": "A", "text": "Alpha text."}, {"doc_id": "two", "title": "B", "text": "Beta \"text\"."}]})
CONVS["documents_tools"] = ([S("Sys"), U("Use both.")], {"documents": [{"doc_id": 7, "text": "Doc."}], "tools": TOOLS})
CONVS["tools_empty_list"] = ([U("Hi")], {"tools": []})
CONVS["image_parts"] = ([{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " Describe. "}]}, A("A cat.")], {})
CONVS["image_url_parts"] = ([S("sys"), {"role": "user", "content": [{"type": "text", "text": "See"}, {"type": "image_url", "image_url": {"url": "http://x"}}]}], {})
CONVS["system_parts"] = ([{"role": "system", "content": [{"type": "text", "text": "Sys parts."}]}, U("Hi")], {})
CONVS["empty_messages"] = ([], {})
CONVS["only_system"] = ([S("Just system.")], {})
CONVS["assistant_first"] = ([A("I start."), U("Ok")], {})
CONVS["reversed_keys"] = ([{"content": "Hi", "role": "user"}, {"content": "Yo", "role": "assistant"}], {})
CONVS["name_fields"] = ([{"role": "user", "content": "Hi", "name": "bob"}, {"role": "assistant", "content": "Hey bob"}], {})
CONVS["deepseek_prefix"] = ([U("Hi"), {"role": "assistant", "content": "Sure", "prefix": True}], {"kwargs": {"thinking": True}, "agp": False})
CONVS["deepseek_tool_then_answer"] = ([U("Q"), {"role": "assistant", "content": None, "tool_calls": [tc("id0000005", "get_weather", "{\"city\": \"D\"}"), tc("id0000006", "get_weather", "{\"city\": \"E\"}")]},
                                       {"role": "tool", "tool_call_id": "id0000005", "content": "r1"}, {"role": "tool", "tool_call_id": "id0000006", "content": "r2"}, A("Done"), U("More")], {"tools": TOOLS})
CONVS["parallel_obj_args"] = ([U("Two cities"), {"role": "assistant", "content": None, "tool_calls": [tc("id0000007", "get_weather", {"city": "F", "days": 2}), tc("id0000008", "get_weather", {"city": "G", "days": 3.5})]},
                               {"role": "tool", "tool_call_id": "id0000007", "content": "a"}, {"role": "tool", "tool_call_id": "id0000008", "content": "b"}], {"tools": TOOLS})
CONVS["tool_no_type_no_id"] = ([U("Q"), {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "H"}}}]}, {"role": "tool", "content": "x"}], {"tools": TOOLS})
CONVS["kw_qwen_think_false_history"] = ([U("a"), A("b"), U("c")], {"kwargs": {"enable_thinking": False}})
CONVS["kw_qwen_think_true"] = ([U("a")], {"kwargs": {"enable_thinking": True}})
CONVS["kw_gptoss_full"] = ([S("Be nice."), U("Hi")], {"kwargs": {"reasoning_effort": "low", "builtin_tools": ["browser", "python"], "model_identity": "You are Test."}, "tools": [WEATHER]})
CONVS["kw_llama_tools_system"] = ([S("Sys prompt."), U("Weather?")], {"kwargs": {"tools_in_user_message": False, "date_string": "01 Jan 2025"}, "tools": TOOLS})
CONVS["kw_llama_builtin_call"] = ([U("Search cats"), {"role": "assistant", "content": None, "tool_calls": [tc("id0000009", "brave_search", {"query": "cats", "n": 1.0})]},
                                   {"role": "ipython", "content": "results"}], {"kwargs": {"builtin_tools": ["brave_search", "wolfram_alpha", "code_interpreter"]}})
CONVS["kw_deepseek_thinking"] = ([U("a"), A("</think>b"), U("c")], {"kwargs": {"thinking": True}})
CONVS["kw_granite_controls"] = ([U("Q")], {"kwargs": {"controls": {"citations": True, "hallucinations": True, "length": "short"}, "thinking": True}, "documents": [{"doc_id": 1, "text": "T"}]})
CONVS["kw_command_citations"] = ([S("Dev preamble"), U("Q")], {"kwargs": {"enable_citations": True}, "documents": [{"title": "t", "text": "x"}]})
CONVS["custom_tools_kw"] = ([U("Hi")], {"kwargs": {"custom_tools": [NOPARAM]}})
CONVS["cmd_tool_plan"] = ([U("Q"), {"role": "assistant", "tool_plan": "I will call.", "tool_calls": [tc("id0000010", "get_weather", {"city": "I"})]},
                           {"role": "tool", "tool_call_id": "id0000010", "content": {"t": 1}}, A("Done.")], {"tools": TOOLS})

# Generation prompt on/off for every conversation, except where set.
out_path = os.path.join(here, "conversations.jsonl.gz")
n = 0
with open(out_path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz, io.TextIOWrapper(gz, encoding="utf-8") as f:
    for name in sorted(registry):
        src = open(os.path.join(tdir, registry[name]["file"]), encoding="utf-8").read()
        st = registry[name]["special_tokens"]
        for cid, (msgs, extra) in CONVS.items():
            agps = [extra["agp"]] if "agp" in extra else [True, False]
            for agp in agps:
                inputs = {"messages": msgs, "tools": extra.get("tools"), "documents": extra.get("documents"),
                          "add_generation_prompt": agp, "special_tokens": st, "kwargs": extra.get("kwargs", {})}
                inputs = json.loads(json.dumps(inputs))
                variables = dict(messages=copy.deepcopy(inputs["messages"]), tools=inputs["tools"], documents=inputs["documents"],
                                 add_generation_prompt=agp, **{**st, **inputs["kwargs"]})
                rec = {"id": f"{name}/{cid}/agp={agp}", "template": name, "inputs": inputs}
                rec.update(render(src, variables))
                # history boundary facts, as the fixtures define them
                last = max((i for i, m in enumerate(msgs) if m.get("role") == "assistant"), default=-1)
                if last >= 0:
                    follow = {"role": "user", "content": "One more question."}
                    hv = dict(variables, messages=copy.deepcopy(inputs["messages"][:last + 1]), add_generation_prompt=False)
                    fv = dict(variables, messages=copy.deepcopy(inputs["messages"][:last + 1]) + [follow], add_generation_prompt=True)
                    h, fr = render(src, hv), render(src, fv)
                    hb = {"history_messages": last + 1, "followup_message": follow}
                    if "expected_error" in h or "expected_error" in fr:
                        hb["error"] = {k: r["expected_error"] for k, r in (("H", h), ("F", fr)) if "expected_error" in r}
                    else:
                        H, F = h["expected"], fr["expected"]
                        lcp = 0
                        while lcp < min(len(H), len(F)) and H[lcp] == F[lcp]:
                            lcp += 1
                        hb.update({"H": H, "F": F, "h_is_prefix_of_f": F.startswith(H), "lcp_chars": lcp, "h_chars": len(H), "f_chars": len(F)})
                    rec["history_boundary"] = hb
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
                n += 1
print(n, "records")
