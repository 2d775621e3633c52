"""Streamed tool-call wire shapes from public evidence, as data.

Each `WireShape` is the sequence of `choices[0].delta.tool_calls` values one stream
delivered (one entry per chunk; `None` for a chunk with no tool calls, such as Azure's
empty-choices prompt-filter chunk or a text chunk) and the exact calls steadyloop must
dispatch for it. `source` names the public evidence: a provider or peer issue/PR
(`owner/repo#N`), or the accumulator rule the shape pins ("accumulator rule N", as
numbered in `steadyloop._stream.accumulator`; "contract ext (x)" for the extensions made
where those rules are silent).

`id` in an expected call is the exact wire id where it must be kept, or `MINTED` where
steadyloop must mint one (absent, blank, malformed or already-used wire id).

`UNDECIDABLE_SHAPES` are shapes no rule can demultiplex (an alias claimed by two open
calls and a continuation carrying only that alias, or a gateway that reuses every label
of a call for the next one). For those the suite asserts only what must still hold:
no call is lost silently and no two calls share an id.

`CONTENT_SHAPES` are streams whose `delta.content` is a list of typed parts (Mistral's
reasoning models), with the text and reasoning steadyloop must read from them and the
words its note must hold; hostile values in that shape among them.

This module is data plus tiny builders; it imports nothing from steadyloop so it can be
read as evidence on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

MINTED: Final = "<minted>"


class _Absent:
    """Marks a field the wire omitted (distinct from an explicit JSON null)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()

Delta = dict[str, Any]
Chunk = list[Delta] | None


def tc(
    *,
    index: Any = ABSENT,
    id: Any = ABSENT,
    name: Any = ABSENT,
    arguments: Any = ABSENT,
    type: Any = ABSENT,
    function: Any = ABSENT,
) -> Delta:
    """One wire delta, omitting every field left ABSENT (None is sent as JSON null)."""
    out: Delta = {}
    if index is not ABSENT:
        out["index"] = index
    if id is not ABSENT:
        out["id"] = id
    if type is not ABSENT:
        out["type"] = type
    if function is not ABSENT:
        out["function"] = function
    elif name is not ABSENT or arguments is not ABSENT:
        fn: dict[str, Any] = {}
        if name is not ABSENT:
            fn["name"] = name
        if arguments is not ABSENT:
            fn["arguments"] = arguments
        out["function"] = fn
    return out


def one(**fields: Any) -> list[Delta]:
    """A chunk carrying exactly one delta."""
    return [tc(**fields)]


@dataclass(frozen=True)
class ExpectedCall:
    name: str
    arguments: str
    id: str = MINTED


@dataclass(frozen=True)
class WireShape:
    case: str
    source: str
    chunks: tuple[Chunk, ...]
    calls: tuple[ExpectedCall, ...]
    dropped: int = 0
    # Exact multiset of AssemblyDefect kinds the accumulator must record.
    defects: tuple[str, ...] = ()
    # Exact `malformed_aliases`; None where the contract does not say (non-string ids).
    malformed_aliases: int | None = 0
    notes: str = ""


@dataclass(frozen=True)
class UndecidableShape:
    case: str
    source: str
    chunks: tuple[Chunk, ...]
    # What the gateway meant to send, in order.
    intended: tuple[ExpectedCall, ...]
    notes: str = ""


W = WireShape
C = ExpectedCall

WIRE_SHAPES: tuple[WireShape, ...] = (
    # ------------------------------------------------------------------ OpenAI shapes
    W(
        case="openai_single_call_args_split",
        source="BerriAI/litellm#20480 (OpenAI example); openai-python streaming docs",
        chunks=(
            None,
            one(index=0, id="call_abc", type="function", name="search", arguments=""),
            one(index=0, arguments='{"qu'),
            one(index=0, arguments='ery":'),
            one(index=0, arguments='"hello"}'),
            None,
        ),
        calls=(C("search", '{"query":"hello"}', "call_abc"),),
    ),
    W(
        case="openai_parallel_sequential",
        source="ollama/ollama#7881 (OpenAI chunks, index present from 0)",
        chunks=(
            one(index=0, id="call_1", type="function", name="get_weather", arguments=""),
            one(index=0, arguments='{"location":'),
            one(index=0, arguments='"Boston"}'),
            one(index=1, id="call_2", type="function", name="get_weather", arguments=""),
            one(index=1, arguments='{"location":'),
            one(index=1, arguments='"Tokyo"}'),
        ),
        calls=(
            C("get_weather", '{"location":"Boston"}', "call_1"),
            C("get_weather", '{"location":"Tokyo"}', "call_2"),
        ),
    ),
    W(
        case="openai_parallel_interleaved_distinct_indices",
        source="accumulator rules (interleaved parallel calls, OpenAI shape); agno-agi/agno#3826",
        chunks=(
            one(index=0, id="call_r", type="function", name="read_file", arguments='{"pa'),
            one(index=1, id="call_w", type="function", name="write_file", arguments='{"pa'),
            one(index=0, arguments='th":"a.txt"'),
            one(index=1, arguments='th":"b.txt",'),
            one(index=1, arguments='"text":"hi"}'),
            one(index=0, arguments="}"),
        ),
        calls=(
            C("read_file", '{"path":"a.txt"}', "call_r"),
            C("write_file", '{"path":"b.txt","text":"hi"}', "call_w"),
        ),
    ),
    W(
        case="two_complete_calls_in_one_chunk",
        source="comet-ml/opik#7385 (Mistral: both calls of a multi-tool response in one delta)",
        chunks=(
            [
                tc(
                    index=0,
                    id="aZ1",
                    type="function",
                    name="get_weather",
                    arguments='{"city":"Paris"}',
                ),
                tc(
                    index=1,
                    id="bY2",
                    type="function",
                    name="get_time",
                    arguments='{"tz":"Europe/Paris"}',
                ),
            ],
        ),
        calls=(
            C("get_weather", '{"city":"Paris"}', "aZ1"),
            C("get_time", '{"tz":"Europe/Paris"}', "bY2"),
        ),
    ),
    W(
        case="bare_fragments_of_two_calls_in_one_chunk",
        source="comet-ml/opik#7385 (several calls' deltas in one chunk), streamed in fragments",
        chunks=(
            [
                tc(index=0, id="call_a", type="function", name="read_file", arguments=""),
                tc(index=1, id="call_b", type="function", name="write_file", arguments=""),
            ],
            [
                tc(index=0, arguments='{"path":'),
                tc(index=1, arguments='{"path":'),
                tc(index=0, arguments='"a"}'),
            ],
            [tc(index=1, arguments='"b"}')],
        ),
        calls=(C("read_file", '{"path":"a"}', "call_a"), C("write_file", '{"path":"b"}', "call_b")),
    ),
    W(
        case="mistral_complete_call_single_chunk",
        source="microsoft/semantic-kernel#6316 (Mistral tool calls arrive whole in one chunk)",
        chunks=(
            one(
                index=0,
                id="D681PevKs",
                type="function",
                name="get_weather",
                arguments='{"city":"Paris"}',
            ),
        ),
        calls=(C("get_weather", '{"city":"Paris"}', "D681PevKs"),),
    ),
    W(
        case="groq_three_same_name_distinct_indices",
        source="BerriAI/litellm#7621 (groq: three get_current_weather calls); vercel/ai#1653",
        chunks=(
            one(
                index=0,
                id="call_n4sU",
                type="function",
                name="get_current_weather",
                arguments='{"location": "San Francisco"}',
            ),
            one(
                index=1,
                id="call_W3vg",
                type="function",
                name="get_current_weather",
                arguments='{"location": "Tokyo"}',
            ),
            one(
                index=2,
                id="call_4pFN",
                type="function",
                name="get_current_weather",
                arguments='{"location": "Paris"}',
            ),
        ),
        calls=(
            C("get_current_weather", '{"location": "San Francisco"}', "call_n4sU"),
            C("get_current_weather", '{"location": "Tokyo"}', "call_W3vg"),
            C("get_current_weather", '{"location": "Paris"}', "call_4pFN"),
        ),
    ),
    W(
        case="lmstudio_llamacpp_id_only_on_first_delta",
        source="openai/codex#7517 (llama.cpp / LM Studio: id on first delta, index after)",
        chunks=(
            one(index=0, id="Xk2", type="function", name="shell", arguments=""),
            one(index=0, arguments='{"command":["ls",'),
            one(index=0, arguments='"-la"]}'),
            one(index=1, id="Yq9", type="function", name="shell", arguments=""),
            one(index=1, arguments='{"command":["pwd"]}'),
        ),
        calls=(
            C("shell", '{"command":["ls","-la"]}', "Xk2"),
            C("shell", '{"command":["pwd"]}', "Yq9"),
        ),
    ),
    W(
        case="deepseek_type_on_every_delta_non_ascii_args",
        source="sgl-project/sglang#19662 (type='function', id=None, name=None on continuations)",
        chunks=(
            one(index=0, id="call_ds1", type="function", name="analyze", arguments=""),
            one(index=0, id=None, type="function", name=None, arguments='{"topic":"'),
            one(index=0, id=None, type="function", name=None, arguments="分析"),
            one(index=0, id=None, type="function", name=None, arguments="本"),
            one(index=0, id=None, type="function", name=None, arguments='"}'),
        ),
        calls=(C("analyze", '{"topic":"分析本"}', "call_ds1"),),
    ),
    # ------------------------------------------------------------------ Ollama
    W(
        case="ollama_three_calls_index0_read_write_read_with_ids",
        source="ollama/ollama#15457; vercel/ai#14277 (every call labelled index 0)",
        chunks=(
            one(
                id="call_a1", index=0, type="function", name="read_file", arguments='{"path":"p0"}'
            ),
            one(
                id="call_b2",
                index=0,
                type="function",
                name="write_file",
                arguments='{"path":"p1","text":"x"}',
            ),
            one(
                id="call_c3", index=0, type="function", name="read_file", arguments='{"path":"p2"}'
            ),
        ),
        calls=(
            C("read_file", '{"path":"p0"}', "call_a1"),
            C("write_file", '{"path":"p1","text":"x"}', "call_b2"),
            C("read_file", '{"path":"p2"}', "call_c3"),
        ),
    ),
    W(
        case="ollama_three_calls_index0_read_write_read_empty_ids",
        source="ollama/ollama openai/openai.go (ToolCall.ID not omitempty); #15457",
        chunks=(
            one(id="", index=0, type="function", name="read_file", arguments='{"path":"p0"}'),
            one(
                id="",
                index=0,
                type="function",
                name="write_file",
                arguments='{"path":"p1","text":"x"}',
            ),
            one(id="", index=0, type="function", name="read_file", arguments='{"path":"p2"}'),
        ),
        calls=(
            C("read_file", '{"path":"p0"}'),
            C("write_file", '{"path":"p1","text":"x"}'),
            C("read_file", '{"path":"p2"}'),
        ),
        notes="Seed round 4: the name mismatch must start a call, not continue the scan.",
    ),
    W(
        case="ollama_three_calls_index0_read_write_read_no_id_field",
        source="continuedev/continue#13225 (Ollama gpt-oss: index but no id); ollama#15457",
        chunks=(
            one(index=0, type="function", name="read_file", arguments='{"path":"p0"}'),
            one(index=0, type="function", name="write_file", arguments='{"path":"p1","text":"x"}'),
            one(index=0, type="function", name="read_file", arguments='{"path":"p2"}'),
        ),
        calls=(
            C("read_file", '{"path":"p0"}'),
            C("write_file", '{"path":"p1","text":"x"}'),
            C("read_file", '{"path":"p2"}'),
        ),
    ),
    W(
        case="ollama_four_alternating_calls_index0_no_ids",
        source="accumulator rule 2; seed 001 round 4 (four alternating calls lost two)",
        chunks=(
            one(index=0, name="read_file", arguments='{"path":"a"}'),
            one(index=0, name="write_file", arguments='{"path":"b"}'),
            one(index=0, name="read_file", arguments='{"path":"c"}'),
            one(index=0, name="write_file", arguments='{"path":"d"}'),
        ),
        calls=(
            C("read_file", '{"path":"a"}'),
            C("write_file", '{"path":"b"}'),
            C("read_file", '{"path":"c"}'),
            C("write_file", '{"path":"d"}'),
        ),
    ),
    W(
        case="ollama_same_name_three_writes_index0_distinct_ids",
        source="NousResearch/hermes-agent#3468 (write_file x3 at index 0, ids call_function_*)",
        chunks=(
            one(
                index=0, id="call_function_x_1", name="write_file", arguments='{"path":"alpha.txt"}'
            ),
            one(
                index=0, id="call_function_x_2", name="write_file", arguments='{"path":"beta.txt"}'
            ),
            one(
                index=0, id="call_function_x_3", name="write_file", arguments='{"path":"gamma.txt"}'
            ),
        ),
        calls=(
            C("write_file", '{"path":"alpha.txt"}', "call_function_x_1"),
            C("write_file", '{"path":"beta.txt"}', "call_function_x_2"),
            C("write_file", '{"path":"gamma.txt"}', "call_function_x_3"),
        ),
    ),
    W(
        case="ollama_parallel_distinct_indices_complete_deltas",
        source="g0t4/ask-openai.nvim ollama notes (qwen2.5-coder parallel run_command)",
        chunks=(
            one(
                id="call_wteop8bt",
                index=0,
                type="function",
                name="run_command",
                arguments='{"command":"ls"}',
            ),
            one(
                id="call_rk2xye1l",
                index=1,
                type="function",
                name="run_command",
                arguments='{"command":"ls -l"}',
            ),
            None,
        ),
        calls=(
            C("run_command", '{"command":"ls"}', "call_wteop8bt"),
            C("run_command", '{"command":"ls -l"}', "call_rk2xye1l"),
        ),
    ),
    W(
        case="ollama_pre_047_no_index_field_two_calls",
        source="ollama/ollama#7881 (tool_calls[].index not populated before v0.4.7)",
        chunks=(
            one(id="call_p1", type="function", name="get_weather", arguments='{"city":"Oslo"}'),
            one(id="call_p2", type="function", name="get_time", arguments='{"tz":"CET"}'),
        ),
        calls=(
            C("get_weather", '{"city":"Oslo"}', "call_p1"),
            C("get_time", '{"tz":"CET"}', "call_p2"),
        ),
    ),
    W(
        case="no_index_no_id_two_named_calls",
        source="ollama/ollama#7881 with empty ids; accumulator rule 4 (named delta starts a call)",
        chunks=(
            one(id="", type="function", name="get_weather", arguments='{"city":"Oslo"}'),
            one(id="", type="function", name="get_time", arguments='{"tz":"CET"}'),
        ),
        calls=(C("get_weather", '{"city":"Oslo"}'), C("get_time", '{"tz":"CET"}')),
    ),
    W(
        case="gpt_oss_index_without_id_split_args",
        source="continuedev/continue#13225 (first delta has index, no id)",
        chunks=(
            one(index=0, type="function", name="read_file", arguments=""),
            one(index=0, arguments='{"filepath":'),
            one(index=0, arguments='"convex/schema.ts"}'),
        ),
        calls=(C("read_file", '{"filepath":"convex/schema.ts"}'),),
    ),
    W(
        case="dynamo_qwen3_parallel_all_index0_with_ids_split",
        source="ai-dynamo/dynamo#4723 (parallel calls all index 0)",
        chunks=(
            one(index=0, id="call_add", type="function", name="add_numbers", arguments=""),
            one(index=0, arguments='{"a": 2, '),
            one(index=0, arguments='"b": 2}'),
            one(index=0, id="call_wx", type="function", name="get_weather", arguments=""),
            one(index=0, arguments='{"location": "Tokyo", '),
            one(index=0, arguments='"unit": "celsius"}'),
        ),
        calls=(
            C("add_numbers", '{"a": 2, "b": 2}', "call_add"),
            C("get_weather", '{"location": "Tokyo", "unit": "celsius"}', "call_wx"),
        ),
    ),
    W(
        case="dynamo_qwen3_parallel_all_index0_no_ids_split",
        source="ai-dynamo/dynamo#4723; accumulator rule 2 (claimant has text, different name)",
        chunks=(
            one(index=0, type="function", name="add_numbers", arguments='{"a": 2, '),
            one(index=0, arguments='"b": 2}'),
            one(index=0, type="function", name="get_weather", arguments=""),
            one(index=0, arguments='{"location": "Tokyo"}'),
        ),
        calls=(
            C("add_numbers", '{"a": 2, "b": 2}'),
            C("get_weather", '{"location": "Tokyo"}'),
        ),
    ),
    # ------------------------------------------------------------------ Gemini
    W(
        case="gemini_no_index_field_single_call",
        source="THU-MAIC/OpenMAIC#1556 (Gemini OpenAI endpoint omits tool_calls[].index)",
        chunks=(
            one(
                id="call_297140",
                type="function",
                name="read",
                arguments='{"offset":1,"limit":100,"path":"/app/SKILL.md"}',
            ),
        ),
        calls=(C("read", '{"offset":1,"limit":100,"path":"/app/SKILL.md"}', "call_297140"),),
    ),
    W(
        case="gemini_index_null_two_calls",
        source="traceloop/openllmetry#3697 (Gemini sends index: null)",
        chunks=(
            one(
                index=None,
                id="function-call-1",
                type="function",
                name="get_weather",
                arguments='{"city":"Rome"}',
            ),
            one(
                index=None,
                id="function-call-2",
                type="function",
                name="get_weather",
                arguments='{"city":"Milan"}',
            ),
        ),
        calls=(
            C("get_weather", '{"city":"Rome"}', "function-call-1"),
            C("get_weather", '{"city":"Milan"}', "function-call-2"),
        ),
    ),
    W(
        case="gemini_no_index_bare_continuation_lone_call",
        source="openai/openai-python#2806, #3246 (index omitted on first and follow-up deltas)",
        chunks=(
            one(id="call_g1", type="function", name="lookup", arguments='{"term":'),
            one(function={"arguments": '"temporal"}'}),
        ),
        calls=(C("lookup", '{"term":"temporal"}', "call_g1"),),
    ),
    W(
        case="gemini_index_null_continuations_lone_call",
        source="traceloop/openllmetry#3697; accumulator rule 4 (lone-call fallback)",
        chunks=(
            one(index=None, id="call_g2", type="function", name="lookup", arguments='{"te'),
            one(index=None, id=None, arguments='rm":"x"}'),
        ),
        calls=(C("lookup", '{"term":"x"}', "call_g2"),),
    ),
    # ------------------------------------------------------------------ vLLM / SGLang / llama-stack
    W(
        case="vllm_no_id_full_name_every_delta",
        source="vllm-project/vllm#18412 (no tool_calls.id in stream; name on every delta)",
        chunks=(
            one(index=0, name="get_current_weather", arguments='{"'),
            one(index=0, name="get_current_weather", arguments="location"),
            one(index=0, name="get_current_weather", arguments='":'),
            one(index=0, name="get_current_weather", arguments=' "Dallas"}'),
        ),
        calls=(C("get_current_weather", '{"location": "Dallas"}'),),
    ),
    W(
        case="vllm_finish_chunk_repeats_id_type_name",
        source="vllm-project/vllm#31438 (finish chunk preserves id/type/name)",
        chunks=(
            one(
                index=0,
                id="chatcmpl-tool-9f",
                type="function",
                name="get_weather",
                arguments='{"city": ',
            ),
            one(
                index=0,
                id="chatcmpl-tool-9f",
                type="function",
                name="get_weather",
                arguments='"Berlin"}',
            ),
        ),
        calls=(C("get_weather", '{"city": "Berlin"}', "chatcmpl-tool-9f"),),
    ),
    W(
        case="first_delta_arguments_null_then_text",
        source="ogx-ai/ogx#5462 (vLLM first delta arguments=None)",
        chunks=(
            one(index=0, id="call_v1", type="function", name="get_weather", arguments=None),
            one(index=0, arguments='{"location": '),
            one(index=0, arguments='"Boston"}'),
        ),
        calls=(C("get_weather", '{"location": "Boston"}', "call_v1"),),
    ),
    W(
        case="sglang_nameless_fragment_before_any_call_opens_a_nameless_call",
        source="sgl-project/sglang#35563 (two-chunk stream: call at index 2 with name gone)",
        chunks=(one(index=2, name="", arguments='{"city": -7}'),),
        calls=(C("", '{"city": -7}'),),
        notes=(
            "accumulator rule 4: an index no call holds opens a call whose name may come "
            "later; still nameless at the end, the turn is `unnamed_tool_call`"
        ),
    ),
    # ------------------------------------------------------------------ LiteLLM / proxies
    W(
        case="litellm_id_and_type_on_every_chunk",
        source="BerriAI/litellm#20480 (id sent on every chunk)",
        chunks=(
            one(index=0, id="call_abc", type="function", name="search", arguments='{"qu'),
            one(index=0, id="call_abc", type="function", arguments='ery":'),
            one(index=0, id="call_abc", type="function", arguments='"hello"}'),
        ),
        calls=(C("search", '{"query":"hello"}', "call_abc"),),
    ),
    W(
        case="litellm_bedrock_first_call_index_1",
        source="BerriAI/litellm#11407 (Bedrock via LiteLLM: first tool call at index 1)",
        chunks=(
            one(
                id="tooluse_BawIVFHuQ2uaPLDBdWlblA",
                index=1,
                type="function",
                name="jira_get_worklog",
                arguments="",
            ),
            one(index=1, type="function", arguments=""),
            one(index=1, type="function", arguments='{"issue_key": "OPS-1"}'),
        ),
        calls=(C("jira_get_worklog", '{"issue_key": "OPS-1"}', "tooluse_BawIVFHuQ2uaPLDBdWlblA"),),
    ),
    W(
        case="dashscope_empty_string_id_on_continuations",
        source="symfony/ai#2220 (Qwen/DashScope repeats id as '' on every continuation)",
        chunks=(
            one(index=0, id="call_q1", type="function", name="get_weather", arguments=""),
            one(index=0, id="", type="function", function={"arguments": '{"city":'}),
            one(index=0, id="", type="function", function={"arguments": '"Hangzhou"}'}),
        ),
        calls=(C("get_weather", '{"city":"Hangzhou"}', "call_q1"),),
    ),
    W(
        case="empty_id_continuation_two_calls_open",
        source="spring-projects/spring-ai#6369 (continuation chunks with id: '')",
        chunks=(
            one(index=0, id="call_s1", type="function", name="a_tool", arguments=""),
            one(index=1, id="call_s2", type="function", name="b_tool", arguments=""),
            one(index=0, id="", arguments='{"x":1}'),
            one(index=1, id="", arguments='{"y":2}'),
        ),
        calls=(C("a_tool", '{"x":1}', "call_s1"), C("b_tool", '{"y":2}', "call_s2")),
    ),
    W(
        case="whitespace_id_on_continuations",
        source="accumulator rule 1 (blank = whitespace only); seed 001 last round",
        chunks=(
            one(index=0, id="call_w1", name="lookup", arguments=""),
            one(index=0, id="   ", arguments='{"q":'),
            one(index=0, id="\t", arguments='"v"}'),
        ),
        calls=(C("lookup", '{"q":"v"}', "call_w1"),),
    ),
    # ------------------------------------------------------------------ names
    W(
        case="nim_minimax_full_name_every_delta",
        source="NousResearch/hermes-agent#11984 (MiniMax via NVIDIA NIM resends full name)",
        chunks=(
            one(index=0, id="call_m1", name="read_file", arguments='{"path"'),
            one(index=0, name="read_file", arguments=':"README'),
            one(index=0, name="read_file", arguments='.md"}'),
        ),
        calls=(C("read_file", '{"path":"README.md"}', "call_m1"),),
    ),
    W(
        case="gpt5_name_resent_with_id_two_calls",
        source="open-webui/open-webui#22177 (GPT-5 re-sends name in follow-up deltas)",
        chunks=(
            one(index=0, id="call_g5a", name="my_server_search", arguments='{"q":"a"'),
            one(index=0, id="call_g5a", name="my_server_search", arguments="}"),
            one(index=1, id="call_g5b", name="my_server_search", arguments='{"q":"b"'),
            one(index=1, id="call_g5b", name="my_server_search", arguments="}"),
        ),
        calls=(
            C("my_server_search", '{"q":"a"}', "call_g5a"),
            C("my_server_search", '{"q":"b"}', "call_g5b"),
        ),
    ),
    W(
        case="name_split_read_plus_file",
        source="accumulator rule 6 (providers split names: read + _file)",
        chunks=(
            one(index=0, id="call_n1", name="read", arguments=""),
            one(index=0, name="_file", arguments='{"path":'),
            one(index=0, arguments='"x"}'),
        ),
        calls=(C("read_file", '{"path":"x"}', "call_n1"),),
    ),
    W(
        case="name_split_around_an_empty_argument_fragment",
        source="accumulator rule 6; BerriAI/litellm#11407 (empty arguments continuation chunks)",
        chunks=(
            one(index=0, id="call_ef", name="read", arguments=""),
            one(index=0, arguments=""),
            one(index=0, name="_file", arguments='{"path":"x"}'),
        ),
        calls=(C("read_file", '{"path":"x"}', "call_ef"),),
    ),
    W(
        case="gemini_name_split_edit_existing_file",
        source="continuedev/continue#5849 (gemini streams names as edit_ex + isting_file)",
        chunks=(
            one(index=0, id="call_e1", name="edit_ex"),
            one(index=0, name="isting_file"),
            one(index=0, arguments='{"filepath":"a.py"}'),
        ),
        calls=(C("edit_existing_file", '{"filepath":"a.py"}', "call_e1"),),
    ),
    W(
        case="mistral_name_fragments_stable_id_index",
        source="openclaw/openclaw#127603 (get_ + weather with stable id/index)",
        chunks=(
            one(index=0, id="call_name", name="get_", arguments=""),
            one(index=0, id="call_name", name="weather", arguments='{"city":'),
            one(index=0, id="call_name", arguments='"Paris"}'),
        ),
        calls=(C("get_weather", '{"city":"Paris"}', "call_name"),),
    ),
    W(
        case="name_split_then_repeated_full_name",
        source="accumulator rule 6 (split name, then restatements of the full name)",
        chunks=(
            one(index=0, id="call_sr", name="write", arguments=""),
            one(index=0, name="_file"),
            one(index=0, name="write_file", arguments='{"path":"o"}'),
            one(index=0, name="write_file"),
        ),
        calls=(C("write_file", '{"path":"o"}', "call_sr"),),
    ),
    W(
        case="blank_name_on_continuation_empty_string",
        source="dyedd/lens#49 (continuation frames carry name: '')",
        chunks=(
            one(index=0, id="toolu_530f", type="function", name="glob", arguments=""),
            one(index=0, name="", arguments='{"path":"","pattern":"**/*"}'),
        ),
        calls=(C("glob", '{"path":"","pattern":"**/*"}', "toolu_530f"),),
    ),
    W(
        case="blank_name_on_continuation_whitespace",
        source="accumulator rule 1 (blank name = absent); seed 001 whitespace round",
        chunks=(
            one(index=0, id="call_b1", name="glob", arguments='{"pattern":'),
            one(index=0, name=" ", arguments='"*.py"}'),
        ),
        calls=(C("glob", '{"pattern":"*.py"}', "call_b1"),),
    ),
    W(
        case="blank_name_on_continuation_null_two_calls_index0",
        source="accumulator rule 1/2 (null name on continuation never starts a call)",
        chunks=(
            one(index=0, id="call_x1", name="read_file", arguments='{"path":"a"}'),
            one(index=0, id="call_x2", name="write_file", arguments='{"path":'),
            one(index=0, name=None, arguments='"b"}'),
            one(index=0, name="   ", arguments=""),
        ),
        calls=(
            C("read_file", '{"path":"a"}', "call_x1"),
            C("write_file", '{"path":"b"}', "call_x2"),
        ),
    ),
    W(
        case="blank_name_on_first_delta_real_name_after",
        source="jjang-ai/vmlx#244 (opening delta name '' and arguments '', real name next)",
        chunks=(
            one(index=0, id="call_x", type="function", name="", arguments=""),
            one(index=0, id="call_x", type="function", name="bash", arguments='{"cmd":"ls"}'),
        ),
        calls=(C("bash", '{"cmd":"ls"}', "call_x"),),
    ),
    # ------------------------------------------------------------------ zero-argument calls
    W(
        case="zero_arg_call_empty_string_stays_empty",
        source="accumulator rule 6 ('' stays ''); seed 000 (juno bind: '' as readily as '{}')",
        chunks=(one(index=0, id="call_t", type="function", name="get_time", arguments=""),),
        calls=(C("get_time", "", "call_t"),),
    ),
    W(
        case="zero_arg_call_arguments_field_absent",
        source="accumulator rule 6; BerriAI/litellm#11262 (ollama get_time, no parameters)",
        chunks=(one(index=0, id="call_t2", type="function", name="get_time"),),
        calls=(C("get_time", "", "call_t2"),),
    ),
    W(
        case="two_zero_arg_calls_distinct_indices",
        source="accumulator rule 6 (verbatim concatenation, never assignment)",
        chunks=(
            one(index=0, id="call_z1", name="get_time", arguments=""),
            one(index=0, arguments=""),
            one(index=1, id="call_z2", name="get_date", arguments=""),
            one(index=1, arguments=""),
        ),
        calls=(C("get_time", "", "call_z1"), C("get_date", "", "call_z2")),
    ),
    W(
        case="zero_arg_then_argful_call",
        source="accumulator rule 6; seed 001 (second call's args empty vanished silently)",
        chunks=(
            one(index=0, id="call_y1", name="list_files", arguments=""),
            one(index=1, id="call_y2", name="read_file", arguments='{"path":"x"}'),
        ),
        calls=(C("list_files", "", "call_y1"), C("read_file", '{"path":"x"}', "call_y2")),
    ),
    W(
        case="argful_then_zero_arg_call_index0_with_ids",
        source="seed 001 Root cause table (two calls at index 0, second args empty)",
        chunks=(
            one(index=0, id="call_k1", name="read_file", arguments='{"path":"a"}'),
            one(index=0, id="call_k2", name="get_time", arguments=""),
        ),
        calls=(C("read_file", '{"path":"a"}', "call_k1"), C("get_time", "", "call_k2")),
    ),
    # ------------------------------------------------------------------ ids (rule 7)
    W(
        case="index0_repeated_id_different_names",
        source="seed 001 round 2 (reused index + repeated id + different names)",
        chunks=(
            one(index=0, id="dup", name="read_file", arguments='{"path":"a"}'),
            one(index=0, id="dup", name="write_file", arguments='{"path":"b"}'),
        ),
        calls=(C("read_file", '{"path":"a"}', "dup"), C("write_file", '{"path":"b"}')),
    ),
    W(
        case="index0_empty_ids_different_names",
        source="seed 001 round 2 (reused index + '' ids + different names)",
        chunks=(
            one(index=0, id="", name="read_file", arguments='{"path":"a"}'),
            one(index=0, id="", name="write_file", arguments='{"path":"b"}'),
        ),
        calls=(C("read_file", '{"path":"a"}'), C("write_file", '{"path":"b"}')),
    ),
    W(
        case="index0_whitespace_ids_different_names",
        source="seed 001 (whitespace id is blank); accumulator rule 1",
        chunks=(
            one(index=0, id=" ", name="read_file", arguments='{"path":"a"}'),
            one(index=0, id="\n", name="write_file", arguments='{"path":"b"}'),
        ),
        calls=(C("read_file", '{"path":"a"}'), C("write_file", '{"path":"b"}')),
    ),
    W(
        case="index0_repeated_id_echoed_on_continuations",
        source="seed 001 round 3 (duplicated id echoed on continuations)",
        chunks=(
            one(index=0, id="dup", name="read_file", arguments='{"path":'),
            one(index=0, id="dup", arguments='"a"}'),
            one(index=0, id="dup", name="write_file", arguments=""),
            one(index=0, id="dup", arguments='{"path":'),
            one(index=0, id="dup", arguments='"b"}'),
        ),
        calls=(C("read_file", '{"path":"a"}', "dup"), C("write_file", '{"path":"b"}')),
    ),
    W(
        case="repeated_id_distinct_indices_continuations_by_index",
        source="seed 001 round 1 (repeated id across calls at distinct indices)",
        chunks=(
            one(index=0, id="dup", name="read_file", arguments='{"path"'),
            one(index=1, id="dup", name="read_file", arguments='{"path"'),
            one(index=0, id="dup", arguments=':"a"}'),
            one(index=1, id="dup", arguments=':"b"}'),
        ),
        calls=(C("read_file", '{"path":"a"}', "dup"), C("read_file", '{"path":"b"}')),
    ),
    W(
        case="duplicate_wire_id_separated_by_another_call",
        source="seed 001 last rounds (minting must scan every emitted id, not the previous)",
        chunks=(
            one(index=0, id="call_1", name="read_file", arguments='{"path":"a"}'),
            one(index=1, id="call_2", name="list_dir", arguments='{"path":"."}'),
            one(index=2, id="call_1", name="read_file", arguments='{"path":"b"}'),
        ),
        calls=(
            C("read_file", '{"path":"a"}', "call_1"),
            C("list_dir", '{"path":"."}', "call_2"),
            C("read_file", '{"path":"b"}'),
        ),
    ),
    W(
        case="empty_ids_distinct_indices",
        source="argszero guard (seed 003: empty identity {id:''}); accumulator rule 7",
        chunks=(
            one(index=0, id="", name="a_tool", arguments="{}"),
            one(index=1, id="", name="b_tool", arguments="{}"),
            one(index=2, id="", name="c_tool", arguments="{}"),
        ),
        calls=(C("a_tool", "{}"), C("b_tool", "{}"), C("c_tool", "{}")),
    ),
    W(
        case="wire_id_equal_to_would_be_minted_id",
        source="accumulator rule 7 (minted ids never equal any wire id of the turn)",
        chunks=(
            one(index=0, name="first", arguments="{}"),
            one(index=1, id="call_sl_1", name="second", arguments="{}"),
            one(index=2, id="call_sl_0", name="third", arguments="{}"),
            one(index=3, id="call_sl_2", name="fourth", arguments="{}"),
            one(index=4, name="fifth", arguments="{}"),
        ),
        calls=(
            C("first", "{}"),
            C("second", "{}", "call_sl_1"),
            C("third", "{}", "call_sl_0"),
            C("fourth", "{}", "call_sl_2"),
            C("fifth", "{}"),
        ),
    ),
    # ------------------------------------------------------------------ late aliases (rule 3)
    W(
        case="late_id_then_id_only_continuation_two_calls_open",
        source="seed 001 round 3/4 (late alias not recorded: id-only continuation died)",
        chunks=(
            one(index=0, name="read_file", arguments=""),
            one(index=1, id="call_b", name="write_file", arguments='{"path":"b"}'),
            one(index=0, id="call_a", arguments='{"path":'),
            one(id="call_a", arguments='"a"}'),
        ),
        calls=(
            C("read_file", '{"path":"a"}', "call_a"),
            C("write_file", '{"path":"b"}', "call_b"),
        ),
    ),
    W(
        case="late_index_decides_order",
        source="seed 001 round 4 (late index not recorded reversed tool order)",
        chunks=(
            one(index=1, id="call_a", name="search", arguments='{"q":"x"}'),
            one(id="call_b", name="fetch", arguments=""),
            one(id="call_b", index=0, arguments='{"url":"u"}'),
        ),
        calls=(
            C("fetch", '{"url":"u"}', "call_b"),
            C("search", '{"q":"x"}', "call_a"),
        ),
    ),
    W(
        case="late_index_then_index_only_continuation_two_calls_open",
        source="accumulator rule 3 (index first seen on a continuation is learned)",
        chunks=(
            one(id="call_a", name="read_file", arguments=""),
            one(id="call_b", name="write_file", arguments='{"path":"b"}'),
            one(id="call_a", index=3, arguments='{"path":'),
            one(index=3, arguments='"a"}'),
        ),
        calls=(
            C("read_file", '{"path":"a"}', "call_a"),
            C("write_file", '{"path":"b"}', "call_b"),
        ),
    ),
    W(
        case="late_index_on_newer_call_takes_the_claim",
        source="accumulator rule 2/3 (newest claimant wins, aliases learned late count)",
        chunks=(
            one(index=0, id="call_a", name="read_file", arguments='{"path":"a"}'),
            one(id="call_b", name="write_file", arguments='{"path":'),
            one(id="call_b", index=0, arguments=""),
            one(index=0, arguments='"b"}'),
        ),
        calls=(
            C("read_file", '{"path":"a"}', "call_a"),
            C("write_file", '{"path":"b"}', "call_b"),
        ),
    ),
    W(
        case="late_index_on_older_call_does_not_take_a_newer_claim",
        source="accumulator rule 2/3 (newest claimant wins, aliases learned late count)",
        chunks=(
            one(id="call_a", name="read_file", arguments='{"path":"a"}'),
            one(index=0, id="call_b", name="write_file", arguments='{"path":'),
            one(id="call_a", index=0, arguments=""),
            one(index=0, arguments='"b"}'),
        ),
        calls=(
            C("read_file", '{"path":"a"}', "call_a"),
            C("write_file", '{"path":"b"}', "call_b"),
        ),
    ),
    # ------------------------------------------------------------------ lone-call fallback (rule 4)
    W(
        case="index_only_continuation_lone_call_without_index",
        source="seed 001 round 4 (index arriving alone on a continuation)",
        chunks=(
            one(id="call_l1", name="get_time", arguments=""),
            one(index=0, arguments="{}"),
        ),
        calls=(C("get_time", "{}", "call_l1"),),
    ),
    W(
        case="id_only_continuation_lone_call_without_id",
        source="seed 001 round 4 (id arriving alone on a continuation); BerriAI/litellm#20712",
        chunks=(
            one(index=0, name="get_time", arguments='{"tz":'),
            one(id="call_late", arguments='"UTC"}'),
        ),
        calls=(C("get_time", '{"tz":"UTC"}', "call_late"),),
    ),
    W(
        case="bare_fragment_lone_call",
        source="accumulator rule 4 (a bare argument fragment continues the lone call)",
        chunks=(
            one(index=0, id="call_f1", name="lookup", arguments='{"q":'),
            one(arguments='"v"}'),
        ),
        calls=(C("lookup", '{"q":"v"}', "call_f1"),),
    ),
    W(
        case="fallback_refused_index_disagrees_with_lone_call",
        source="seed 001 round 4 (an index that disagrees with the lone call)",
        chunks=(
            one(index=0, id="call_a", name="read_file", arguments='{"path":"a"}'),
            one(index=1, arguments='{"path":"zzz"}'),
        ),
        # Not absorbed by the lone call; by rule 4, a new, nameless call.
        calls=(C("read_file", '{"path":"a"}', "call_a"), C("", '{"path":"zzz"}')),
    ),
    W(
        case="fallback_refused_id_disagrees_with_lone_call",
        source="seed 001 round 4 (an id that disagrees with the lone call)",
        chunks=(
            one(index=0, id="call_a", name="read_file", arguments='{"path":"a"}'),
            one(id="call_other", arguments='{"path":"zzz"}'),
        ),
        # Not absorbed by the lone call; by rule 4, a new, nameless call.
        calls=(
            C("read_file", '{"path":"a"}', "call_a"),
            C("", '{"path":"zzz"}', "call_other"),
        ),
    ),
    W(
        case="differently_named_call_without_alias_not_absorbed",
        source="seed 001 round 4 (fallback must not absorb a differently named call)",
        chunks=(
            one(index=0, id="call_a", name="read_file", arguments='{"path":"a"}'),
            one(name="write_file", arguments='{"path":"b"}'),
        ),
        calls=(C("read_file", '{"path":"a"}', "call_a"), C("write_file", '{"path":"b"}')),
    ),
    # ------------------------------------------------------------------ dropping (rule 5)
    W(
        case="bare_fragment_two_calls_open_dropped",
        source="accumulator rule 5; seed 001 round 1 (bare delta absorbed by the active call)",
        chunks=(
            one(index=0, id="call_a", name="read_file", arguments='{"path":"a"}'),
            one(index=1, id="call_b", name="read_file", arguments='{"path":"b"}'),
            one(arguments='{"path":"c"}'),
        ),
        calls=(C("read_file", '{"path":"a"}', "call_a"), C("read_file", '{"path":"b"}', "call_b")),
        dropped=1,
        defects=("dropped_delta",),
    ),
    W(
        case="unknown_index_fragment_two_calls_open_dropped",
        source="accumulator rule 2/5 (an index no call claims is not absorbed)",
        chunks=(
            one(index=0, id="call_a", name="read_file", arguments='{"path":"a"}'),
            one(index=1, id="call_b", name="read_file", arguments='{"path":"b"}'),
            one(index=7, arguments='{"path":"x"}'),
            one(id="call_zz", arguments='{"path":"y"}'),
        ),
        # Not absorbed by either call; by rule 4, two new, nameless calls.
        calls=(
            C("read_file", '{"path":"a"}', "call_a"),
            C("read_file", '{"path":"b"}', "call_b"),
            C("", '{"path":"x"}'),
            C("", '{"path":"y"}', "call_zz"),
        ),
    ),
    W(
        case="alias_no_call_has_seen_is_not_claimed_by_a_call_without_aliases",
        source="accumulator rule 2 (not contradicted is not enough: one alias must match) + rule 5",
        chunks=(
            one(index=0, id="call_a", name="read_file", arguments='{"path":"a"}'),
            one(name="write_file", arguments='{"path":"b"}'),
            one(index=7, arguments='{"path":"x"}'),
            one(id="call_zz", arguments='{"path":"y"}'),
        ),
        # Not claimed by the alias-less call; by rule 4, new, nameless calls.
        calls=(
            C("read_file", '{"path":"a"}', "call_a"),
            C("write_file", '{"path":"b"}'),
            C("", '{"path":"x"}'),
            C("", '{"path":"y"}', "call_zz"),
        ),
    ),
    # ------------------------------------------------------------------ rule 4a: the open call
    W(
        case="lmstudio_gemma4_new_id_on_every_fragment",
        source="NousResearch/hermes-agent#5254 (LM Studio + Gemma 4: a new id per fragment)",
        chunks=(
            one(index=0, id="701601222", type="function", name="shell", arguments=""),
            one(index=0, id="tool-call-1", name="", arguments="{\n"),
            one(index=0, id="tool-call-2", name="", arguments=" "),
            one(index=0, id="tool-call-3", name="", arguments=' "'),
            one(index=0, id="tool-call-4", name="", arguments="command"),
            one(index=0, id="tool-call-5", name="", arguments='": "ls"'),
            one(index=0, id="tool-call-6", name="", arguments=""),
            one(index=0, id="tool-call-7", name="", arguments="\n}"),
        ),
        calls=(C("shell", '{\n  "command": "ls"\n}', "701601222"),),
        notes="rule 4a: the open call's arguments are unfinished and no id names another call",
    ),
    W(
        case="lmstudio_gemma4_new_id_on_every_fragment_two_calls",
        source="NousResearch/hermes-agent#5331 (test_lmstudio_multiple_fragmented_tool_calls)",
        chunks=(
            one(index=0, id="11", type="function", name="shell", arguments=""),
            one(index=0, id="tool-call-1", name="", arguments='{"command":'),
            one(index=0, id="tool-call-2", name="", arguments='"ls"}'),
            one(index=0, id="12", type="function", name="read_file", arguments=""),
            one(index=0, id="tool-call-3", name="", arguments='{"path":'),
            one(index=0, id="tool-call-4", name="", arguments='"a.md"}'),
        ),
        calls=(
            C("shell", '{"command":"ls"}', "11"),
            C("read_file", '{"path":"a.md"}', "12"),
        ),
    ),
    W(
        case="glm_mistral_null_string_id_on_continuations",
        source="langchain-ai/langchainjs#11505 (glm-5-2 on Mistral: id 'null', name '')",
        chunks=(
            one(index=0, id="chatcmpl-tool-b6f7", type="function", name="read", arguments=""),
            one(index=0, id="null", name="", arguments='{"filePath":'),
            one(index=0, id="null", name="", arguments='"/tmp/a.md"}'),
        ),
        calls=(C("read", '{"filePath":"/tmp/a.md"}', "chatcmpl-tool-b6f7"),),
        notes='rule 1: "null" is the text of an absent id (Mistral refuses it, zed#54058)',
    ),
    W(
        case="glm_mistral_null_string_id_two_calls_interleaved",
        source="langchain-ai/langchainjs#11505 (parallel continuations left ambiguous there)",
        chunks=(
            one(index=0, id="chatcmpl-tool-a", type="function", name="read", arguments=""),
            one(index=1, id="chatcmpl-tool-b", type="function", name="read", arguments=""),
            one(index=1, id="null", name="", arguments='{"filePath":'),
            one(index=0, id="null", name="", arguments='{"filePath":'),
            one(index=0, id="null", name="", arguments='"a"}'),
            one(index=1, id="null", name="", arguments='"b"}'),
        ),
        calls=(
            C("read", '{"filePath":"a"}', "chatcmpl-tool-a"),
            C("read", '{"filePath":"b"}', "chatcmpl-tool-b"),
        ),
        notes="rule 1 decides it by index, which rule 4a alone (newest call only) could not",
    ),
    W(
        case="glm_mistral_own_ids_on_continuations",
        source="mistralai/mistral-vibe#1127 (GLM-5.x: 'toolcall0' ids after Mistral's own)",
        chunks=(
            one(index=0, id="chatcmpl-tool-b6f7", type="function", name="read", arguments=""),
            one(index=0, id="toolcall0", name="", arguments='{"filePath":'),
            one(index=0, id="toolcall0", name="", arguments='"/tmp/a.md"}'),
        ),
        calls=(C("read", '{"filePath":"/tmp/a.md"}', "chatcmpl-tool-b6f7"),),
        notes="rule 4a, then the absorbed id: the first fragment is read as a continuation",
    ),
    W(
        case="glm_mistral_null_string_id_opening_is_minted",
        source="zed-industries/zed#53605 (Mistral's 'null' id; the API refuses it back)",
        chunks=(
            one(index=0, id="null", type="function", name="read", arguments='{"p":"a"}'),
            one(index=1, id="null", type="function", name="read", arguments='{"p":"b"}'),
        ),
        calls=(C("read", '{"p":"a"}'), C("read", '{"p":"b"}')),
    ),
    W(
        case="deepseek_gateway_second_call_tail_one_index_up",
        source="agno-agi/agno#8880 (second call's head at index 0, its tail at index 1)",
        chunks=(
            one(index=0, id="call_0", type="function", name="get_weather", arguments=""),
            one(index=0, arguments='{"city":"Paris"}'),
            one(index=0, id="call_1", type="function", name="get_time", arguments='{"tz":'),
            one(index=1, arguments='"Europe/'),
            one(index=1, arguments='Paris"}'),
        ),
        calls=(
            C("get_weather", '{"city":"Paris"}', "call_0"),
            C("get_time", '{"tz":"Europe/Paris"}', "call_1"),
        ),
        notes="rule 4a (assembled): index 1 names no call, the newest call is unfinished",
    ),
    W(
        case="deepseek_gateway_third_call_reuses_the_absorbed_index",
        source="agno-agi/agno#8880, the same off-by-one carried to a third call",
        chunks=(
            one(index=0, id="call_0", type="function", name="a", arguments='{"k":1}'),
            one(index=0, id="call_1", type="function", name="b", arguments='{"k":'),
            one(index=1, arguments="2}"),
            one(index=1, id="call_2", type="function", name="c", arguments='{"k":'),
            one(index=2, arguments="3}"),
        ),
        calls=(
            C("a", '{"k":1}', "call_0"),
            C("b", '{"k":2}', "call_1"),
            C("c", '{"k":3}', "call_2"),
        ),
    ),
    W(
        case="deepseek_gateway_third_call_of_the_same_name_at_the_absorbed_index",
        source="agno-agi/agno#8880, the off-by-one with two calls of one name",
        chunks=(
            one(index=0, id="call_0", type="function", name="read", arguments='{"p":'),
            one(index=1, arguments='"a"}'),
            one(index=1, id="call_1", type="function", name="read", arguments='{"p":'),
            one(index=2, arguments='"b"}'),
        ),
        calls=(C("read", '{"p":"a"}', "call_0"), C("read", '{"p":"b"}', "call_1")),
        notes="a new id with the absorber's name is a new call, not a restatement",
    ),
    W(
        case="name_after_arguments_next_to_a_zero_argument_call",
        source="accumulator rules 4 and 4a (rule 4a must not take it)",
        chunks=(
            one(index=0, id="call_t", type="function", name="get_time", arguments=""),
            one(index=1, arguments='{"q":"x"}'),
            one(index=1, name="search"),
        ),
        calls=(C("get_time", "", "call_t"), C("search", '{"q":"x"}')),
    ),
    W(
        case="name_after_arguments_next_to_an_unfinished_call",
        source="accumulator rules 4 and 4a (the name arrives with the label)",
        chunks=(
            one(index=0, id="call_a", type="function", name="read_file", arguments='{"p":'),
            one(index=1, id="call_b", arguments='{"q":"x"}'),
            one(index=1, id="call_b", name="search"),
            one(index=0, arguments='"a"}'),
        ),
        calls=(C("read_file", '{"p":"a"}', "call_a"), C("search", '{"q":"x"}', "call_b")),
    ),
    # ------------------------------------------------------------------ contract extensions
    W(
        case="ext_a_alias_only_opening_named_later",
        source="contract ext (a); jjang-ai/vmlx#219 (opening delta before the name is known)",
        chunks=(
            one(index=0, id="call_a", name="read_file", arguments='{"path":"a"}'),
            one(index=2, id="call_c", type="function"),
            one(index=2, name="write_file"),
            one(index=2, arguments='{"path":"c"}'),
        ),
        calls=(C("read_file", '{"path":"a"}', "call_a"), C("write_file", '{"path":"c"}', "call_c")),
    ),
    W(
        case="ext_a_alias_only_opening_never_named",
        source="contract ext (a); argszero guard (seed 003: name '' left for the runtime)",
        chunks=(
            one(index=0, id="call_u", type="function"),
            one(index=0, arguments="{}"),
        ),
        calls=(C("", "{}", "call_u"),),
    ),
    W(
        case="ext_a_name_arrives_after_the_arguments",
        source="contract ext (a); vllm-project/vllm#31438 (name restated on the finish chunk)",
        chunks=(
            one(index=0, id="call_ln", type="function"),
            one(index=0, arguments='{"q":'),
            one(index=0, arguments='"v"}'),
            one(index=0, id="call_ln", type="function", name="lookup"),
        ),
        calls=(C("lookup", '{"q":"v"}', "call_ln"),),
    ),
    W(
        case="name_after_arguments_on_the_opening_delta",
        source="accumulator rule 4 (exact repro: arguments on the opening delta, name later)",
        chunks=(
            one(index=0, id="call_nl", arguments='{"q":"x"}'),
            one(index=0, name="search"),
        ),
        calls=(C("search", '{"q":"x"}', "call_nl"),),
    ),
    W(
        case="name_after_arguments_second_call",
        source="accumulator rule 4, a second call opened by its id before its name",
        chunks=(
            one(index=0, id="call_a", name="read_file", arguments='{"path":"a"}'),
            one(index=1, id="call_b", arguments='{"path":'),
            one(index=1, arguments='"b"}'),
            one(index=1, name="write_file"),
        ),
        calls=(
            C("read_file", '{"path":"a"}', "call_a"),
            C("write_file", '{"path":"b"}', "call_b"),
        ),
    ),
    W(
        case="name_after_arguments_index_only",
        source="accumulator rule 4, an index no call holds opens the call (no id at all)",
        chunks=(
            one(index=0, arguments='{"q":"x"}'),
            one(index=0, name="search"),
        ),
        calls=(C("search", '{"q":"x"}'),),
    ),
    W(
        case="still_nameless_at_the_end",
        source="accumulator rule 4 (a call still nameless at the end of the stream is the defect)",
        chunks=(one(index=0, id="call_nl", arguments='{"q":"x"}'),),
        calls=(C("", '{"q":"x"}', "call_nl"),),
    ),
    W(
        case="ext_a_index_only_opening_named_later",
        source="contract ext (a), the opening delta carrying an index only; accumulator rule 4",
        chunks=(
            one(index=0, id="call_a", name="read_file", arguments='{"path":"a"}'),
            one(index=1, type="function"),
            one(index=1, arguments='{"path":"c"}'),
            one(index=1, name="write_file"),
        ),
        calls=(C("read_file", '{"path":"a"}', "call_a"), C("write_file", '{"path":"c"}')),
    ),
    W(
        case="ext_a_id_only_opening_named_later",
        source="contract ext (a), the opening delta carrying an id only; accumulator rule 4",
        chunks=(
            one(index=0, id="call_a", name="read_file", arguments='{"path":"a"}'),
            one(id="call_c", type="function"),
            one(id="call_c", arguments='{"path":"c"}'),
            one(id="call_c", name="write_file"),
        ),
        calls=(C("read_file", '{"path":"a"}', "call_a"), C("write_file", '{"path":"c"}', "call_c")),
    ),
    W(
        case="ext_b_empty_and_type_only_deltas_ignored",
        source="contract ext (b); microsoft/semantic-kernel#7114 (Azure empty deltas)",
        chunks=(
            [],
            one(index=0, id="call_a", name="read_file", arguments='{"path":'),
            [{}],
            [{"type": "function"}],
            one(index=1, id="call_b", name="read_file", arguments='{"path":"b"}'),
            [{"function": {}}, {"id": "", "function": {"name": "", "arguments": ""}}],
            [{"index": None, "id": None, "function": None}],
            one(index=0, arguments='"a"}'),
        ),
        calls=(C("read_file", '{"path":"a"}', "call_a"), C("read_file", '{"path":"b"}', "call_b")),
    ),
    W(
        case="ext_d_arguments_object_llamacpp",
        source="ggml-org/llama.cpp#20198 (arguments returned as a JSON object)",
        chunks=(
            one(index=0, id="call_o1", type="function", name="add", arguments={"a": 25, "b": 17}),
        ),
        calls=(C("add", '{"a":25,"b":17}', "call_o1"),),
        defects=("malformed_arguments",),
    ),
    W(
        case="ext_d_arguments_object_minimax",
        source="can1357/oh-my-pi#1779 (MiniMax streams arguments as an object)",
        chunks=(
            one(index=0, id="call_mm", type="function", name="bash", arguments=""),
            one(index=0, arguments={"command": "printf ok"}),
        ),
        calls=(C("bash", '{"command":"printf ok"}', "call_mm"),),
        defects=("malformed_arguments",),
    ),
    W(
        case="ext_d_non_string_non_object_arguments_ignored",
        source="contract ext (d); ar-jan/llm-venice#45 (mixed argument types in a stream)",
        chunks=(
            one(index=0, id="call_n", name="multiply", arguments='{"x": 1337, '),
            one(index=0, arguments=42),
            one(index=0, arguments=["y"]),
            one(index=0, arguments='"y": 42}'),
        ),
        calls=(C("multiply", '{"x": 1337, "y": 42}', "call_n"),),
        defects=("malformed_arguments", "malformed_arguments"),
    ),
    W(
        case="ext_e_non_string_id_ignored_as_alias",
        source="contract ext (e); sigoden/aichat#1296 (llama.cpp expects id absent or string)",
        chunks=(
            one(index=0, id="call_a", name="lookup", arguments='{"q":'),
            one(index=0, id=12345, arguments='"v"}'),
        ),
        calls=(C("lookup", '{"q":"v"}', "call_a"),),
        defects=("malformed_id",),
        malformed_aliases=None,
    ),
    W(
        case="ext_e_non_string_id_on_opening_delta_minted",
        source="contract ext (e)",
        chunks=(one(index=0, id=7, name="get_time", arguments="{}"),),
        calls=(C("get_time", "{}"),),
        defects=("malformed_id",),
        malformed_aliases=None,
    ),
    W(
        case="ext_e_non_string_name_on_continuation",
        source="contract ext (e)",
        chunks=(
            one(index=0, id="call_a", name="lookup", arguments='{"q":'),
            one(index=0, name=123, arguments='"v"}'),
        ),
        calls=(C("lookup", '{"q":"v"}', "call_a"),),
        defects=("malformed_name",),
    ),
    W(
        case="ext_h_arguments_split_inside_surrogate_pair",
        source=(
            "contract ext (h); accumulator rule 6; openclaw/openclaw#110642 (UTF-16 unsafe slicing)"
        ),
        chunks=(
            one(index=0, id="call_s", name="echo", arguments='{"text":"hi \ud83d'),
            one(index=0, arguments='\ude00"}'),
        ),
        calls=(C("echo", '{"text":"hi \U0001f600"}', "call_s"),),
    ),
    W(
        case="ext_h_name_split_inside_surrogate_pair",
        source="contract ext (h); elizaOS/eliza#30904 (escaped pair decoded half by half)",
        chunks=(
            one(index=0, id="call_sn", name="note_\ud83d", arguments=""),
            one(index=0, name="\ude00", arguments="{}"),
        ),
        calls=(C("note_\U0001f600", "{}", "call_sn"),),
    ),
    # ------------------------------------------------------------------ malformed index (rule 9)
    W(
        case="index_minus_one_on_lone_call_continuation",
        source="accumulator rule 9; seed 001 (negative index made upstream drop the call)",
        chunks=(
            one(index=0, id="call_a", name="lookup", arguments='{"q":'),
            one(index=-1, arguments='"v"}'),
        ),
        calls=(C("lookup", '{"q":"v"}', "call_a"),),
        defects=("malformed_index",),
        malformed_aliases=1,
    ),
    W(
        case="index_fractional_on_opening_delta_orders_by_creation",
        source="accumulator rule 9/8; seed 001 (fractional index dropped the call upstream)",
        chunks=(
            one(index=1.5, id="call_a", name="read_file", arguments='{"path":"a"}'),
            one(index=0, id="call_b", name="write_file", arguments='{"path":"b"}'),
        ),
        calls=(C("read_file", '{"path":"a"}', "call_a"), C("write_file", '{"path":"b"}', "call_b")),
        defects=("malformed_index",),
        malformed_aliases=1,
    ),
    W(
        case="index_string_digit_ignored_resolves_by_id",
        source='accumulator rule 9 ("0" is not an index)',
        chunks=(
            one(index=0, id="call_a", name="read_file", arguments='{"path":'),
            one(index=1, id="call_b", name="write_file", arguments='{"path":"b"}'),
            one(index="1", id="call_a", arguments='"a"}'),
        ),
        calls=(C("read_file", '{"path":"a"}', "call_a"), C("write_file", '{"path":"b"}', "call_b")),
        defects=("malformed_index",),
        malformed_aliases=1,
    ),
    W(
        case="index_true_ignored_resolves_by_id",
        source="accumulator rule 9 (true is not an index, though Python's bool is an int)",
        chunks=(
            one(index=0, id="call_a", name="read_file", arguments='{"path":'),
            one(index=1, id="call_b", name="write_file", arguments='{"path":"b"}'),
            one(index=True, id="call_a", arguments='"a"}'),
        ),
        calls=(C("read_file", '{"path":"a"}', "call_a"), C("write_file", '{"path":"b"}', "call_b")),
        defects=("malformed_index",),
        malformed_aliases=1,
    ),
    W(
        case="index_false_and_minus_one_bare_fragment_two_calls_dropped",
        source="accumulator rule 9 + rule 5 (a malformed index leaves a bare fragment)",
        chunks=(
            one(index=0, id="call_a", name="read_file", arguments='{"path":"a"}'),
            one(index=1, id="call_b", name="write_file", arguments='{"path":"b"}'),
            one(index=False, arguments="}"),
            one(index=-1, arguments="}"),
        ),
        calls=(C("read_file", '{"path":"a"}', "call_a"), C("write_file", '{"path":"b"}', "call_b")),
        dropped=2,
        defects=("malformed_index", "dropped_delta", "malformed_index", "dropped_delta"),
        malformed_aliases=2,
    ),
    W(
        case="large_integer_index_is_valid",
        source="seed 001 (index 1e6 killed the turn upstream); accumulator rule 9",
        chunks=(
            one(index=1_000_000, id="call_big", name="lookup", arguments='{"q":'),
            one(index=1_000_000, arguments='"v"}'),
            one(index=3, id="call_small", name="lookup", arguments='{"q":"w"}'),
        ),
        calls=(C("lookup", '{"q":"w"}', "call_small"), C("lookup", '{"q":"v"}', "call_big")),
    ),
    # ------------------------------------------------------------------ order (rule 8)
    W(
        case="five_calls_arrival_unlike_index_order",
        source="accumulator rule 8 (five calls; three cannot catch a broken comparator)",
        chunks=(
            one(index=3, id="call_3", name="t3", arguments='{"n":3}'),
            one(index=0, id="call_0", name="t0", arguments='{"n":0}'),
            one(index=4, id="call_4", name="t4", arguments='{"n":4}'),
            one(index=1, id="call_1", name="t1", arguments='{"n":1}'),
            one(index=2, id="call_2", name="t2", arguments='{"n":2}'),
        ),
        calls=(
            C("t0", '{"n":0}', "call_0"),
            C("t1", '{"n":1}', "call_1"),
            C("t2", '{"n":2}', "call_2"),
            C("t3", '{"n":3}', "call_3"),
            C("t4", '{"n":4}', "call_4"),
        ),
    ),
    W(
        case="five_calls_interleaved_fragments_unlike_index_order",
        source="accumulator rule 8; OpenAI parallel shape with distinct indices",
        chunks=(
            one(index=4, id="call_4", name="t4", arguments='{"n":'),
            one(index=2, id="call_2", name="t2", arguments='{"n":'),
            one(index=0, id="call_0", name="t0", arguments='{"n":'),
            one(index=3, id="call_3", name="t3", arguments='{"n":'),
            one(index=1, id="call_1", name="t1", arguments='{"n":'),
            one(index=1, arguments="1}"),
            one(index=3, arguments="3}"),
            one(index=0, arguments="0}"),
            one(index=2, arguments="2}"),
            one(index=4, arguments="4}"),
        ),
        calls=(
            C("t0", '{"n":0}', "call_0"),
            C("t1", '{"n":1}', "call_1"),
            C("t2", '{"n":2}', "call_2"),
            C("t3", '{"n":3}', "call_3"),
            C("t4", '{"n":4}', "call_4"),
        ),
    ),
    W(
        case="five_calls_one_index_missing_creation_order",
        source="accumulator rule 8 (order by index only when every call supplied one)",
        chunks=(
            one(index=3, id="call_3", name="t3", arguments='{"n":3}'),
            one(index=0, id="call_0", name="t0", arguments='{"n":0}'),
            one(id="call_x", name="tx", arguments='{"n":9}'),
            one(index=1, id="call_1", name="t1", arguments='{"n":1}'),
            one(index=2, id="call_2", name="t2", arguments='{"n":2}'),
        ),
        calls=(
            C("t3", '{"n":3}', "call_3"),
            C("t0", '{"n":0}', "call_0"),
            C("tx", '{"n":9}', "call_x"),
            C("t1", '{"n":1}', "call_1"),
            C("t2", '{"n":2}', "call_2"),
        ),
    ),
    W(
        case="five_calls_index_null_creation_order",
        source="accumulator rule 8; seed 001 round 4 (index: null must not sort ahead)",
        chunks=(
            one(index=3, id="call_3", name="t3", arguments='{"n":3}'),
            one(index=0, id="call_0", name="t0", arguments='{"n":0}'),
            one(index=4, id="call_4", name="t4", arguments='{"n":4}'),
            one(index=None, id="call_x", name="tx", arguments='{"n":9}'),
            one(index=1, id="call_1", name="t1", arguments='{"n":1}'),
        ),
        calls=(
            C("t3", '{"n":3}', "call_3"),
            C("t0", '{"n":0}', "call_0"),
            C("t4", '{"n":4}', "call_4"),
            C("tx", '{"n":9}', "call_x"),
            C("t1", '{"n":1}', "call_1"),
        ),
    ),
    W(
        case="five_calls_duplicate_index_creation_order",
        source="accumulator rule 8 (a duplicated index orders nothing)",
        chunks=(
            one(index=3, id="call_3", name="t3", arguments='{"n":3}'),
            one(index=0, id="call_0", name="t0", arguments='{"n":0}'),
            one(index=3, id="call_3b", name="t3b", arguments='{"n":33}'),
            one(index=1, id="call_1", name="t1", arguments='{"n":1}'),
            one(index=2, id="call_2", name="t2", arguments='{"n":2}'),
        ),
        calls=(
            C("t3", '{"n":3}', "call_3"),
            C("t0", '{"n":0}', "call_0"),
            C("t3b", '{"n":33}', "call_3b"),
            C("t1", '{"n":1}', "call_1"),
            C("t2", '{"n":2}', "call_2"),
        ),
    ),
    W(
        case="five_calls_malformed_index_creation_order",
        source="accumulator rule 8 + 9 (a malformed index is no index)",
        chunks=(
            one(index=3, id="call_3", name="t3", arguments='{"n":3}'),
            one(index=0, id="call_0", name="t0", arguments='{"n":0}'),
            one(index=-1, id="call_m", name="tm", arguments='{"n":-1}'),
            one(index=1, id="call_1", name="t1", arguments='{"n":1}'),
            one(index=2, id="call_2", name="t2", arguments='{"n":2}'),
        ),
        calls=(
            C("t3", '{"n":3}', "call_3"),
            C("t0", '{"n":0}', "call_0"),
            C("tm", '{"n":-1}', "call_m"),
            C("t1", '{"n":1}', "call_1"),
            C("t2", '{"n":2}', "call_2"),
        ),
        defects=("malformed_index",),
        malformed_aliases=1,
    ),
)

U = UndecidableShape

UNDECIDABLE_SHAPES: tuple[UndecidableShape, ...] = (
    U(
        case="absorbed_label_naming_another_call_while_unfinished",
        source="accumulator rule 4a (a wrong call is never dispatched): rule 4a's guard",
        chunks=(
            one(index=0, id="call_0", type="function", name="a", arguments='{"k":1}'),
            one(index=0, id="call_1", type="function", name="b", arguments='{"k":'),
            one(index=1, arguments='{"j":2}'),
            one(index=1, name="c"),
        ),
        # Either a DeepSeek tail that b never finished, or c's arguments before its name.
        intended=(C("a", '{"k":1}', "call_0"), C("b", '{"k":'), C("c", '{"j":2}')),
        notes="rule 4a read index 1 as b's; the name proves it may not be: dropped_deltas",
    ),
    U(
        case="index0_shared_interleaved_continuations",
        source="seed 001 Review focus (alias claimed by two open calls)",
        chunks=(
            one(index=0, id="call_r", name="read_file", arguments='{"path":'),
            one(index=0, id="call_w", name="write_file", arguments='{"path":'),
            one(index=0, arguments='"a"}'),
            one(index=0, arguments='"b"}'),
        ),
        intended=(
            C("read_file", '{"path":"a"}', "call_r"),
            C("write_file", '{"path":"b"}', "call_w"),
        ),
    ),
    U(
        case="shared_id_distinct_indices_id_only_continuations",
        source="seed 001 Review focus (same id on two open calls, continuation carries id only)",
        chunks=(
            one(index=0, id="dup", name="read_file", arguments='{"path":'),
            one(index=1, id="dup", name="write_file", arguments='{"path":'),
            one(id="dup", arguments='"a"}'),
            one(id="dup", arguments='"b"}'),
        ),
        intended=(C("read_file", '{"path":"a"}', "dup"), C("write_file", '{"path":"b"}')),
    ),
    U(
        case="same_id_same_name_no_index",
        source="seed 001 Review focus (same id + same name + no index loses a call)",
        chunks=(
            one(id="dup", name="read_file", arguments='{"path":"a"}'),
            one(id="dup", name="read_file", arguments='{"path":"b"}'),
        ),
        intended=(C("read_file", '{"path":"a"}', "dup"), C("read_file", '{"path":"b"}')),
    ),
    U(
        case="reused_index_shared_id_same_name",
        source="seed 001 (reused index with a shared id and name loses one, like no-index)",
        chunks=(
            one(index=0, id="dup", name="read_file", arguments='{"path":"a"}'),
            one(index=0, id="dup", name="read_file", arguments='{"path":"b"}'),
        ),
        intended=(C("read_file", '{"path":"a"}', "dup"), C("read_file", '{"path":"b"}')),
    ),
    U(
        case="ollama_same_name_index0_no_ids",
        source="NousResearch/hermes-agent#3468 shape without ids (write_file x3, index 0)",
        chunks=(
            one(index=0, id="", name="write_file", arguments='{"path":"alpha.txt"}'),
            one(index=0, id="", name="write_file", arguments='{"path":"beta.txt"}'),
            one(index=0, id="", name="write_file", arguments='{"path":"gamma.txt"}'),
        ),
        intended=(
            C("write_file", '{"path":"alpha.txt"}'),
            C("write_file", '{"path":"beta.txt"}'),
            C("write_file", '{"path":"gamma.txt"}'),
        ),
    ),
    U(
        case="gemini31_second_call_args_under_first_index_blank_name",
        source="dyedd/lens#49 (gemini-3.1-pro: second call's args on index 0, name '')",
        chunks=(
            one(index=0, id="toolu_530f", type="function", name="glob", arguments=""),
            one(index=0, name="", arguments='{"path":"","pattern":"**/*"}'),
            one(index=0, name="", arguments='{"path":"content/wiki","pattern":""}'),
        ),
        intended=(
            C("glob", '{"path":"","pattern":"**/*"}', "toolu_530f"),
            C("glob", '{"path":"content/wiki","pattern":""}'),
        ),
    ),
    U(
        case="gpt54_two_json_objects_same_index",
        source="open-webui/open-webui#22235 (GPT-5.4 sends several argument objects per index)",
        chunks=(
            one(index=0, id="call_q", name="search", arguments='{"query":"A","count":5}'),
            one(index=0, arguments='{"query":"B","count":5}'),
        ),
        intended=(
            C("search", '{"query":"A","count":5}', "call_q"),
            C("search", '{"query":"B","count":5}'),
        ),
    ),
    U(
        case="litellm_duplicate_summary_chunk",
        source="BerriAI/litellm#20480 (duplicate summary chunk appended after the stream)",
        chunks=(
            one(index=0, id="call_abc", type="function", name="search", arguments='{"qu'),
            one(index=0, id="call_abc", type="function", arguments='ery":"hello"}'),
            one(
                index=0,
                id="call_abc",
                type="function",
                name="search",
                arguments='{"query":"hello"}',
            ),
        ),
        intended=(C("search", '{"query":"hello"}', "call_abc"),),
        notes="One call intended; the repeat makes it unparseable, which defects must flag.",
    ),
    U(
        case="opencodex_duplicate_arguments_chunk",
        source="lidge-jun/opencodex#361 (each call's arguments chunk sent twice)",
        chunks=(
            one(index=0, id="tool_1", name="shell", arguments=""),
            one(index=0, arguments='{"command":"ls /home/opc"}'),
            one(index=0, arguments='{"command":"ls /home/opc"}'),
            one(index=1, id="tool_2", name="read_file", arguments=""),
            one(index=1, arguments='{"path":"/home/opc/README.md"}'),
        ),
        intended=(
            C("shell", '{"command":"ls /home/opc"}', "tool_1"),
            C("read_file", '{"path":"/home/opc/README.md"}', "tool_2"),
        ),
    ),
)


# ---------------------------------------------------------------- content as typed parts


@dataclass(frozen=True)
class ContentShape:
    """The `choices[0].delta` values of one stream whose `content` is not (only) a plain
    string, and what steadyloop must read from them: the answer text, the reasoning, and
    words the turn's note must hold (empty: no note). Never a refused chunk."""

    case: str
    source: str
    deltas: tuple[Delta, ...]
    text: str
    reasoning: str
    noted: tuple[str, ...] = ()


def thinking(*texts: str, **more: Any) -> Delta:
    """Mistral's `ThinkChunk`: a `thinking` part holding text parts."""
    return {"type": "thinking", "thinking": [{"type": "text", "text": t} for t in texts], **more}


def text_part(text: Any) -> Delta:
    return {"type": "text", "text": text}


CS = ContentShape

CONTENT_SHAPES: tuple[ContentShape, ...] = (
    CS(
        case="magistral_thinking_then_string_content",
        source=(
            "braintrustdata/braintrust-proxy packages/proxy/src/providers/mistral.ts "
            "(recorded magistral-medium-latest chunk on api.mistral.ai)"
        ),
        deltas=(
            {"role": "assistant", "content": ""},
            {"content": [thinking("Okay, 4 divided")]},
            {"content": [thinking(" by 2 is")]},
            {"content": [thinking(" equal to", " 2.")]},
            {"content": "The answer"},
            {"content": " is 2."},
        ),
        text="The answer is 2.",
        reasoning="Okay, 4 divided by 2 is equal to 2.",
    ),
    CS(
        case="magistral_thinking_closed_then_text_parts",
        source=(
            "mistralai/client-ts docs/models/components/thinkchunk.md (`closed`); "
            "text parts beside thinking as braintrust-proxy's mistral.ts reads them"
        ),
        deltas=(
            {"content": [thinking("Check the units.", closed=False)]},
            {"content": [thinking("", closed=True), text_part("Metres.")]},
            {"content": [text_part(" Both.")]},
        ),
        text="Metres. Both.",
        reasoning="Check the units.",
    ),
    CS(
        case="thinking_as_one_string",
        source="contract ext: a `thinking` part whose `thinking` is one string is reasoning",
        deltas=({"content": [{"type": "thinking", "thinking": "Flat."}, text_part("Yes.")]},),
        text="Yes.",
        reasoning="Flat.",
    ),
    CS(
        case="mistral_reference_parts_are_noted",
        source=(
            "Mistral's chunk models as public client code declares them: ReferenceChunk "
            "{type: reference, reference_ids}, ToolReferenceChunk inside ThinkChunk"
        ),
        deltas=(
            {"content": [text_part("Paris"), {"type": "reference", "reference_ids": [1, 2]}]},
            {
                "content": [
                    {
                        "type": "thinking",
                        "thinking": [
                            {"type": "tool_reference", "tool": "web_search", "title": "Paris"},
                            {"type": "text", "text": "cited"},
                        ],
                    }
                ]
            },
            {"content": [text_part(" is the capital.")]},
        ),
        text="Paris is the capital.",
        reasoning="cited",
        noted=("reference x1", "thinking/tool_reference x1"),
    ),
    # Hostile values in the new shape: text, a note, never a refused turn.
    CS(
        case="hostile_empty_list_and_empty_parts",
        source="hostile values: an empty list, empty thinking, empty text",
        deltas=(
            {"content": []},
            {"content": [thinking(), {"type": "thinking", "thinking": []}, text_part("")]},
            {"content": "ok"},
        ),
        text="ok",
        reasoning="",
    ),
    CS(
        case="hostile_unknown_part_types",
        source="hostile values: part types not known here (an image, a made-up type)",
        deltas=(
            {"content": [{"type": "image_url", "image_url": {"url": "data:,"}}]},
            {"content": [{"type": "x" * 500, "text": "not read"}, text_part("kept")]},
        ),
        text="kept",
        reasoning="",
        noted=("image_url x1", "x" * 40 + " x1"),
    ),
    CS(
        case="hostile_nested_garbage",
        source="hostile values: parts that are not objects, nested lists, types not strings",
        deltas=(
            {"content": ["a", 1, None, True, [[["deep"]]], {"no": "type"}]},
            {"content": [{"type": {"a": 1}}, {"type": ["text"]}, {"type": ""}]},
            {"content": [{"type": "thinking", "thinking": [[{"type": "text", "text": "x"}], 7]}]},
            {"content": [{"type": "thinking", "thinking": {"type": "text", "text": "x"}}]},
            {"content": [text_part({"nested": "object"}), text_part(["list"])]},
            {"content": "survived"},
        ),
        text="survived",
        reasoning="",
        noted=(
            "not an object x5",
            "without a type x4",
            "thinking/not an object x2",
            "thinking (malformed) x1",
            "text (malformed) x2",
        ),
    ),
    CS(
        case="hostile_nan_and_huge_numbers_in_parts",
        source="hostile values: NaN, Infinity and 1e300 where text belongs",
        deltas=(
            {"content": [text_part(float("nan")), thinking("fine")]},
            {"content": [text_part(float("inf")), text_part(1e300), text_part("ok")]},
        ),
        text="ok",
        reasoning="fine",
        noted=("text (malformed) x3",),
    ),
    CS(
        case="hostile_lone_surrogates_in_parts",
        source="hostile values: lone UTF-16 surrogates (a pair split across parts and chunks)",
        deltas=(
            {"content": [text_part("smile \ud83d")]},
            {"content": [text_part("\ude00 and a lone \udc00"), thinking("\ud800?")]},
            {"content": [{"type": "\udfff"}]},
        ),
        text="smile \U0001f600 and a lone \ufffd",
        reasoning="\ufffd?",
        noted=("\ufffd x1",),
    ),
    CS(
        case="hostile_many_distinct_types_are_bounded",
        source="hostile values: a note stays bounded however many part types arrive",
        deltas=tuple({"content": [{"type": f"kind{n}"}]} for n in range(40)),
        text="",
        reasoning="",
        noted=("kind0 x1", "other x34"),
    ),
)
