"""``expect.judge`` end to end over loopback: an eval whose judge is served by the wire
server (a forced ``record_verdicts`` call, one verdict passing and one failing), each
sample's judge calls recorded into its cassette after the run's, then replayed with the
server stopped and every socket refused: by :func:`replay_sample`, and by ``openprogram-sim
run`` on a scenario whose ``model:`` is the sample's cassette. No key on disk."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from _support import run_cli

from openprogram_sim.eval import (
    EvalOptions,
    RetryPolicy,
    evaluate,
    replay_sample,
    scenario_slug,
)
from openprogram_sim.scenario import load_scenario
from openprogram_sim.wire import WireServer

KEY = "sk-" + "placeholder-judge-" + "0123456789" + "abcdefghijklmnopqrstuv"  # built from pieces

AGENT = [
    {"tool_calls": [{"lookup_order": {"order_id": "42"}}]},
    {"text": "Order 42 has shipped; it arrives on Friday."},
]
"""What the served "real" model does in every sample."""

SCENARIO = """\
scenario: the agent looks the order up and says where it is
tools:
  lookup_order:
    parameters: {{type: object, properties: {{order_id: {{type: string}}}}, required: [order_id]}}
    returns: "order 42: shipped, arrives Friday"
exec: {{content: "Where is order 42?", tools: [lookup_order]}}
model:
  - tool_calls: [{{lookup_order: {{order_id: "42"}}}}]
  - text: "Order 42 has shipped."
expect:
  trajectory: {{mode: exact, calls: [{{lookup_order: {{order_id: "42"}}}}]}}
  judge:
    model: openai:gpt-4o-mini
    base_url: "{url}/s/{{sample}}-judge/v1"
    rubric: "The agent answers customers of a shop."
    criteria:
      - {{name: names_status, text: "The answer says the order has shipped."}}
      - {{name: gives_date, text: "The answer gives the delivery day.", min_score: 4}}
"""


def verdicts(**given: tuple[str, int]) -> list[dict[str, Any]]:
    """The judge's reply: one forced call with a verdict per criterion."""
    args = {
        name: {"verdict": v, "score": s, "reason": f"{name}: {v} at {s}"}
        for name, (v, s) in given.items()
    }
    return [{"tool_calls": [{"record_verdicts": args}], "usage": {"input": 150, "output": 40}}]


def block_sockets(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every outgoing connection refused loudly; the attempts, for the assertion."""
    attempts: list[Any] = []

    def refuse(self: socket.socket, address: Any) -> None:
        attempts.append(address)
        raise AssertionError(f"a socket was opened to {address} during a replay")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return attempts


@pytest.fixture
def recording() -> Iterator[None]:
    with mock.patch.dict(os.environ, {"CI": "", "OPENAI_API_KEY": KEY}):
        yield


def judged_eval(
    tmp_path: Path, judge_replies: list[list[dict[str, Any]]], retries: int = 4
) -> tuple[Path, list[Any], Path]:
    """The judged scenario evaluated against a served agent, sample N's judge answering
    with ``judge_replies[N-1]``; the scenario, its samples and their folder."""
    with WireServer(AGENT) as server:
        path = tmp_path / "judged.yaml"
        path.write_text(SCENARIO.format(url=server.url))
        slug = scenario_slug(str(path))
        for i, reply in enumerate(judge_replies, 1):
            server.open_session(f"{slug}-{i}-judge", reply)
        options = EvalOptions(
            model="openai:gpt-4o-mini",
            base_url=server.url + "/s/{sample}/v1",
            samples=len(judge_replies),
            out=tmp_path / "eval",
            retries=RetryPolicy(max_retries=retries),
        )
        result = evaluate(load_scenario(path), options)
        server.assert_consumed()  # every judge session asked exactly once
    return path, result.samples, tmp_path / "eval" / slug


def one_sample(server: WireServer, path: Path, tmp_path: Path) -> Any:
    """``path`` evaluated once against ``server``'s sessions, samples under tmp_path/eval."""
    options = EvalOptions(
        model="openai:gpt-4o-mini",
        base_url=server.url + "/s/{sample}/v1",
        samples=1,
        out=tmp_path / "eval",
    )
    (sample,) = evaluate(load_scenario(path), options).samples
    return sample


def eval_once(server: WireServer, path: Path, tmp_path: Path, samples: int = 1) -> Any:
    """``openprogram-sim eval`` of ``path`` against ``server``, with ``--json``: what it
    printed and the scenario's result."""
    done = run_cli(
        "eval", str(path), "--model", "openai:gpt-4o-mini", "--samples", str(samples),
        "--base-url", server.url + "/s/{sample}/v1", "--out", str(tmp_path / "eval"),
        "--json", str(tmp_path / "results.json"),
    )  # fmt: skip
    (result,) = json.loads((tmp_path / "results.json").read_text())["scenarios"]
    return done, result


PASSING = verdicts(names_status=("pass", 5), gives_date=("pass", 5))
FAILING = verdicts(names_status=("pass", 5), gives_date=("pass", 3))  # below min_score 4


def test_each_criterion_is_a_check_and_the_judge_is_recorded_after_the_run(
    tmp_path: Path, recording: None
) -> None:
    path, samples, folder = judged_eval(tmp_path, [PASSING, FAILING])
    assert [s.checks for s in samples] == [
        {"trajectory": True, "judge.names_status": True, "judge.gives_date": True},
        {"trajectory": True, "judge.names_status": True, "judge.gives_date": False},
    ]
    assert [s.passed for s in samples] == [True, False]
    assert samples[1].failures == [
        "judge.gives_date: the judge (openai:gpt-4o-mini) said pass, score 3/5 (needed: "
        f"min_score 4)\nat {path}:18\ncriterion: The answer gives the delivery day.\n"
        "reason: gives_date: pass at 3"
    ]
    cassette = yaml.safe_load((folder / "sample-002.yaml").read_text())
    meta = cassette["metadata"]["openprogram"]
    assert meta["judge"]["model"] == "openai:gpt-4o-mini"
    assert meta["judge"]["interactions"] == [3]  # after the run's two
    assert meta["judge"]["usage"] == {"input": 150, "output": 40}  # the judge's tokens
    assert meta["judge"]["base_url"].endswith("/s/judged-2-judge/v1")
    uris = [i["request"]["uri"] for i in cassette["interactions"]]
    assert [u.rsplit("/s/", 1)[1] for u in uris] == [
        "judged-2/v1/chat/completions",
        "judged-2/v1/chat/completions",
        "judged-2-judge/v1/chat/completions",
    ]
    for file in folder.iterdir():
        text = file.read_text()
        assert KEY not in text and "placeholder-judge" not in text, file
        assert "authorization: Bearer <redacted>" in text


def test_the_judge_is_asked_with_a_forced_call_at_temperature_0(
    tmp_path: Path, recording: None
) -> None:
    _, _, folder = judged_eval(tmp_path, [PASSING])
    cassette = yaml.safe_load((folder / "sample-001.yaml").read_text())
    body = cassette["interactions"][2]["request"]["body"]["json"]
    assert body["temperature"] == 0.0
    assert body["tool_choice"] == {"type": "function", "function": {"name": "record_verdicts"}}
    assert body["parallel_tool_calls"] is False
    assert "stream" not in body or body["stream"] is False
    (tool,) = body["tools"]
    schema = tool["function"]["parameters"]
    assert schema["required"] == ["names_status", "gives_date"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["gives_date"]["required"] == ["verdict", "score", "reason"]
    system, user = body["messages"]
    assert system["role"] == "system"
    assert system["content"].endswith("\n\nThe agent answers customers of a shop.")
    assert user["content"] == (
        "What the agent was asked:\nWhere is order 42?\n\n"
        "Its tool calls, in order:\n"
        '1. lookup_order({"order_id": "42"})\n   result: order 42: shipped, arrives Friday\n\n'
        "Its final answer:\nOrder 42 has shipped; it arrives on Friday.\n\n"
        "The criteria:\n"
        "- names_status: The answer says the order has shipped.\n"
        "- gives_date: The answer gives the delivery day.\n\n"
        "Call record_verdicts with a verdict for each criterion, by name."
    )


REPLAY = """\
scenario: sample {n} replayed, its judge too
tools:
  lookup_order:
    parameters: {{type: object, properties: {{order_id: {{type: string}}}}, required: [order_id]}}
    returns: "{result}"
exec: {{content: "Where is order 42?", tools: [lookup_order]}}
model: {{cassette: eval/judged/sample-00{n}.yaml}}
expect:
  model_calls: {{min: 1, max: 3}}
  judge:
    model: openai:gpt-4o-mini
    rubric: "The agent answers customers of a shop."
    criteria:
      - {{name: names_status, text: "The answer says the order has shipped."}}
      - {{name: gives_date, text: "The answer gives the delivery day.", min_score: 4}}
"""


def test_a_recorded_sample_and_its_judge_replay_with_the_server_stopped(
    tmp_path: Path, recording: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, samples, folder = judged_eval(tmp_path, [PASSING, FAILING])
    attempts = block_sockets(monkeypatch)
    monkeypatch.setenv("CI", "1")
    monkeypatch.delenv("OPENAI_API_KEY")
    scenario = load_scenario(path)
    for sample in samples:
        again = replay_sample(scenario, folder / f"sample-{sample.index:03d}.yaml")
        assert (again.index, again.checks, again.failures) == (
            sample.index,
            sample.checks,
            sample.failures,
        )
    # openprogram-sim run, on a scenario whose model: is the sample's cassette
    result = "order 42: shipped, arrives Friday"
    for n in (1, 2):
        (tmp_path / f"replay{n}.yaml").write_text(REPLAY.format(n=n, result=result))
    done = run_cli("run", "replay1.yaml", "replay2.yaml", cwd=tmp_path)
    assert done.returncode == 1, done.stdout
    lines = done.stdout.splitlines()
    assert lines[0].startswith("PASS  replay1.yaml"), done.stdout
    assert lines[1].startswith("FAIL  replay2.yaml"), done.stdout
    assert (
        "- judge.gives_date: the judge (openai:gpt-4o-mini) said pass, score 3/5 (needed: "
        "min_score 4)\n  at replay2.yaml:15\n  criterion: The answer gives the delivery day.\n"
        "  reason: gives_date: pass at 3\n"
    ) in done.stdout
    assert "never requested" not in done.stdout  # the judge's interaction is not the run's
    assert attempts == []


def test_a_run_that_replays_differently_asks_the_judge_something_it_did_not_record(
    tmp_path: Path, recording: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    judged_eval(tmp_path, [PASSING])
    attempts = block_sockets(monkeypatch)
    monkeypatch.setenv("CI", "1")
    (tmp_path / "changed.yaml").write_text(REPLAY.format(n=1, result="order 42: lost"))
    done = run_cli("run", "changed.yaml", cwd=tmp_path)
    assert done.returncode == 1
    assert "- the judge's recorded verdict could not be replayed\n  at changed.yaml:10\n" in (
        done.stdout
    )
    assert "no recorded interaction matches request 3 (POST /s/judged-1-judge/v1/" in done.stdout
    assert "a run that does something else than the recorded one asks the judge" in done.stdout
    assert attempts == []


def test_under_the_scripted_model_the_judge_is_not_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts = block_sockets(monkeypatch)
    monkeypatch.setenv("CI", "1")
    (tmp_path / "scripted.yaml").write_text(SCENARIO.format(url="http://127.0.0.1:9"))
    done = run_cli("run", "scripted.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout
    assert done.stdout.startswith("PASS  scripted.yaml")
    assert attempts == []


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (
            [{"text": "Both criteria pass."}],
            "judge openai:gpt-4o-mini: no verdict for criteria 'names_status', 'gives_date': "
            'the judge answered with text "Both criteria pass.", not a call of record_verdicts',
        ),
        (
            [{"tool_calls": [{"lookup_order": {"order_id": "42"}}]}],
            "judge openai:gpt-4o-mini: no verdict for criteria 'names_status', 'gives_date': "
            "the judge called 'lookup_order', not record_verdicts",
        ),
        (
            verdicts(names_status=("pass", 5)),
            "judge openai:gpt-4o-mini: criterion 'gives_date': no verdict (it sent verdicts "
            "for: 'names_status')",
        ),
        (
            verdicts(names_status=("maybe", 3), gives_date=("pass", 9)),
            "judge openai:gpt-4o-mini: criterion 'names_status': verdict \"maybe\" is not pass "
            'or fail ({"verdict": "maybe", "score": 3, "reason": "names_status: maybe at 3"}); '
            "criterion 'gives_date': score 9 is not a whole number from 1 to 5",
        ),
        (
            verdicts(names_status=("pass", 5), gives_date=("pass", 5), tone=("pass", 5)),
            "judge openai:gpt-4o-mini: verdicts for criteria the scenario does not name: tone",
        ),
        (
            [{"wire": {"status": 500}, "text": "x"}],
            "judge openai:gpt-4o-mini: the judge's call failed, so no criterion "
            "('names_status', 'gives_date') has a verdict: ",
        ),
    ],
    ids=["text", "other-tool", "missing", "bad-values", "unknown", "http-500"],
)
def test_a_malformed_verdict_stops_the_eval_naming_the_criterion_and_what_came_back(
    tmp_path: Path, recording: None, reply: list[dict[str, Any]], message: str
) -> None:
    from openprogram_sim.eval import EvalSetupError
    from openprogram_sim.scenario import JudgeError

    with pytest.raises(EvalSetupError) as caught:
        judged_eval(tmp_path, [reply], retries=0)  # a 500 not retried: it reaches the judge
    text = str(caught.value)
    assert text.startswith(f"{tmp_path / 'judged.yaml'}: sample 1: {message}"), text
    assert text.endswith(f"(the sample's cassette: {tmp_path / 'eval' / 'judged'}/sample-001.yaml)")
    assert isinstance(caught.value.__cause__, JudgeError)
    saved = yaml.safe_load((tmp_path / "eval" / "judged" / "sample-001.yaml").read_text())
    assert saved["metadata"]["openprogram"]["judge"]["interactions"][0] == 3


def test_the_cli_reports_a_malformed_verdict_with_status_2(tmp_path: Path, recording: None) -> None:
    with WireServer(AGENT) as server:
        path = tmp_path / "judged.yaml"
        path.write_text(SCENARIO.format(url=server.url))
        server.open_session("judged-1-judge", [{"text": "fine"}])
        done = run_cli(
            "eval", str(path), "--model", "openai:gpt-4o-mini", "--samples", "1",
            "--base-url", server.url + "/s/{sample}/v1", "--out", str(tmp_path / "eval"),
        )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "sample 1: judge openai:gpt-4o-mini: no verdict for criteria 'names_status'" in (
        done.stderr
    )


def test_a_verdict_whose_arguments_are_not_an_object_is_named() -> None:
    from openprogram.types import AssistantMessage, ToolCall
    from openprogram_sim.scenario import JudgeError, JudgeSpec, read_verdicts

    spec = JudgeSpec(model="openai:gpt-4o-mini", criteria=["The answer is short."])
    assert [c.name for c in spec.criteria] == ["c1"]
    message = AssistantMessage([ToolCall("call_1", "record_verdicts", "c1: pass")])
    with pytest.raises(JudgeError) as caught:
        read_verdicts(spec, message)
    assert str(caught.value) == (
        "judge openai:gpt-4o-mini: no verdict for criteria 'c1': the arguments of "
        'record_verdicts are not a JSON object: "c1: pass"'
    )
    good = AssistantMessage(
        [ToolCall("call_1", "record_verdicts", {"c1": {"verdict": "fail", "score": 2.0}})]
    )
    (verdict,) = read_verdicts(spec, good).values()
    assert (verdict.verdict, verdict.score, verdict.reason, verdict.passed) == (
        "fail",
        2,
        "",
        False,
    )


def test_the_eval_json_has_a_rate_per_criterion(tmp_path: Path, recording: None) -> None:
    with WireServer(AGENT) as server:
        path = tmp_path / "judged.yaml"
        path.write_text(SCENARIO.format(url=server.url))
        for i, reply in enumerate([PASSING, FAILING, PASSING], 1):
            server.open_session(f"judged-{i}-judge", reply)
        done = run_cli(
            "eval", str(path), "--model", "openai:gpt-4o-mini", "--samples", "3",
            "--base-url", server.url + "/s/{sample}/v1", "--out", str(tmp_path / "eval"),
            "--json", str(tmp_path / "results.json"),
        )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    (result,) = json.loads((tmp_path / "results.json").read_text())["scenarios"]
    assert result["expectations"] == {
        "trajectory": {"passed": 3, "samples": 3},
        "judge.names_status": {"passed": 3, "samples": 3},
        "judge.gives_date": {"passed": 2, "samples": 3},
    }
    assert result["not_applicable"] == []
    assert "judge.gives_date 2/3" in done.stdout


def test_another_judge_than_the_one_recorded_is_named_not_asked(
    tmp_path: Path, recording: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openprogram_sim.scenario import JudgeError

    path, _, folder = judged_eval(tmp_path, [PASSING])
    attempts = block_sockets(monkeypatch)
    monkeypatch.setenv("CI", "1")
    text = REPLAY.format(n=1, result="order 42: shipped, arrives Friday")
    text = text.replace("customers of a shop.", "customers.").replace(", min_score: 4", "")
    (tmp_path / "other.yaml").write_text(text)
    done = run_cli("run", "other.yaml", cwd=tmp_path)
    assert done.returncode == 1
    assert (
        '- expect.judge is not the judge recorded in the cassette: its rubric is "The agent '
        'answers customers.", the recorded one\'s "The agent answers customers of a shop."; '
        "criterion 'gives_date' differs: "
        '{"name": "gives_date", "text": "The answer gives the delivery day.", "min_score": 4} '
        '-> {"name": "gives_date", "text": "The answer gives the delivery day.", "min_score": '
        "null}\n  at other.yaml:10\n  its recorded calls answer only the judge that was asked"
    ) in done.stdout
    changed = load_scenario(tmp_path / "other.yaml")
    with pytest.raises(JudgeError) as caught:
        replay_sample(changed, folder / "sample-001.yaml")
    assert str(caught.value).startswith(
        f"{folder / 'sample-001.yaml'}: expect.judge is not the judge recorded in it: its rubric"
    )
    assert replay_sample(load_scenario(path), folder / "sample-001.yaml").passed
    assert attempts == []


SCRIPTED = """\
scenario: what sample {n} did, scripted, its judge replayed from the sample's cassette
tools:
  lookup_order:
    parameters: {{type: object, properties: {{order_id: {{type: string}}}}, required: [order_id]}}
    returns: "order 42: shipped, arrives Friday"
exec: {{content: "Where is order 42?", tools: [lookup_order]}}
model:
  - tool_calls: [{{lookup_order: {{order_id: "42"}}}}]
  - text: "{answer}"
expect:
  judge:
    model: openai:gpt-4o-mini
    cassette: {cassette}
    rubric: "The agent answers customers of a shop."
    criteria:
      - {{name: names_status, text: "The answer says the order has shipped."}}
      - {{name: gives_date, text: "The answer gives the delivery day.", min_score: 4}}
"""


def test_a_scripted_run_replays_its_judge_from_a_named_cassette(
    tmp_path: Path, recording: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    judged_eval(tmp_path, [PASSING, FAILING])
    attempts = block_sockets(monkeypatch)
    monkeypatch.setenv("CI", "1")
    said = AGENT[1]["text"]
    for n in (1, 2):
        cassette = f"eval/judged/sample-00{n}.yaml"
        text = SCRIPTED.format(n=n, answer=said, cassette=cassette)
        (tmp_path / f"scripted{n}.yaml").write_text(text)
    other = SCRIPTED.format(n=1, answer="It is on its way.", cassette="eval/judged/sample-001.yaml")
    (tmp_path / "other_answer.yaml").write_text(other)
    missing = SCRIPTED.format(n=1, answer=said, cassette="eval/judged/sample-009.yaml")
    (tmp_path / "missing.yaml").write_text(missing)
    names = ("scripted1.yaml", "scripted2.yaml", "other_answer.yaml", "missing.yaml")
    done = run_cli("run", *names, cwd=tmp_path)
    assert done.returncode == 1
    verdicts_line = [line.split()[:2] for line in done.stdout.splitlines()[:4]]
    assert verdicts_line == [
        ["PASS", "scripted1.yaml"],
        ["FAIL", "scripted2.yaml"],
        ["FAIL", "other_answer.yaml"],
        ["FAIL", "missing.yaml"],
    ]
    assert "- judge.gives_date: the judge (openai:gpt-4o-mini) said pass, score 3/5" in (
        done.stdout
    )
    assert "  at scripted2.yaml:17\n" in done.stdout
    # another final answer asks the judge another question, which the recording cannot answer
    assert "- the judge's recorded verdict could not be replayed\n  at other_answer.yaml:11\n" in (
        done.stdout
    )
    assert (
        "- expect.judge.cassette cannot be replayed\n  at missing.yaml:13\n  cassette "
        "eval/judged/sample-009.yaml does not exist and the record mode is none (CI is set, "
        "so nothing is recorded)"
    ) in done.stdout
    assert attempts == []


def test_a_named_cassette_without_a_judge_is_refused(tmp_path: Path) -> None:
    # a real recording with no judge in it (openprogram-sim record's, not eval's)
    plain = Path(__file__).parents[1] / "sim" / "data" / "weather_cassette.yaml"
    (tmp_path / "plain.yaml").write_bytes(plain.read_bytes())
    text = SCRIPTED.format(n=1, answer=AGENT[1]["text"], cassette="plain.yaml")
    (tmp_path / "s.yaml").write_text(text)
    done = run_cli("run", "s.yaml", cwd=tmp_path)
    assert done.returncode == 1
    assert (
        "- expect.judge.cassette plain.yaml holds no judge's calls\n  at s.yaml:13\n  name the "
        "cassette of an eval sample whose scenario has this expect.judge"
    ) in done.stdout


def test_a_judged_conversation_shows_the_judge_each_prompt_and_reply(
    tmp_path: Path, recording: None
) -> None:
    agent = [{"text": "Hello, how can I help?"}, {"text": "Goodbye!"}]
    with WireServer(agent) as server:
        path = tmp_path / "talk.yaml"
        path.write_text(
            "scenario: a greeting and a goodbye\n"
            "conversation:\n"
            '  - exec: {content: "Hi"}\n'
            '  - exec: {content: "Bye"}\n'
            "model: [{text: Hello.}, {text: Bye.}]\n"
            "expect:\n"
            "  judge:\n"
            "    model: openai:gpt-4o-mini\n"
            f'    base_url: "{server.url}/s/{{sample}}-judge/v1"\n'
            '    criteria: ["It greets, then says goodbye."]\n'
        )
        reply = {"c1": {"verdict": "pass", "score": 5, "reason": "both"}}
        server.open_session("talk-1-judge", [{"tool_calls": [{"record_verdicts": reply}]}])
        sample = one_sample(server, path, tmp_path)
    assert sample.checks == {"judge.c1": True}
    cassette = yaml.safe_load((tmp_path / "eval" / "talk" / "sample-001.yaml").read_text())
    asked = cassette["interactions"][2]["request"]["body"]["json"]["messages"][1]["content"]
    assert asked.startswith(
        "The conversation, in order (the agent's tool calls are listed below):\n"
        "user: Hi\nagent: Hello, how can I help?\nuser: Bye\nagent: Goodbye!\n\n"
        "Its tool calls, in order:\n(none)\n\nIts final answer:\nGoodbye!\n\n"
    ), asked


@pytest.mark.slow  # an inner pytest session
def test_under_pytest_a_judged_sample_replays_with_its_judge(
    pytester: pytest.Pytester, recording: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    judged_eval(pytester.path, [PASSING, FAILING])
    attempts = block_sockets(monkeypatch)
    monkeypatch.setenv("CI", "1")
    (pytester.path / "scenarios").mkdir()
    result = "order 42: shipped, arrives Friday"
    for n in (1, 2):
        text = REPLAY.format(n=n, result=result).replace("eval/", "../eval/")
        (pytester.path / "scenarios" / f"replay{n}.yaml").write_text(text)
    outcome = pytester.runpytest_inprocess("--openprogram-scenarios", "scenarios")
    outcome.assert_outcomes(passed=1, failed=1)
    outcome.stdout.fnmatch_lines(
        [
            "- judge.gives_date: the judge (openai:gpt-4o-mini) said pass, score 3/5 (needed: "
            "min_score 4)",
            "  at scenarios/replay2.yaml:15",
        ]
    )
    assert attempts == []


def test_a_judge_of_another_provider_is_recorded_scrubbed_and_replays(
    tmp_path: Path, recording: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    anthropic_key = "sk-ant-" + "api03-placeholder-" + "0123456789abcdefghijklmn"
    monkeypatch.setenv("ANTHROPIC_API_KEY", anthropic_key)
    with WireServer([{"text": "Hello there."}]) as server:
        path = tmp_path / "greet.yaml"
        path.write_text(
            "scenario: a greeting judged by another provider's model\n"
            'exec: {content: "Hi"}\n'
            "model: [{text: Hello.}]\n"
            "expect:\n"
            "  judge:\n"
            "    model: anthropic:claude-sonnet-4-5\n"
            f'    base_url: "{server.url}/s/{{sample}}-judge"\n'
            '    criteria: ["It greets."]\n'
        )
        reply = {"c1": {"verdict": "fail", "score": 1, "reason": "no"}}
        server.open_session("greet-1-judge", [{"tool_calls": [{"record_verdicts": reply}]}])
        sample = one_sample(server, path, tmp_path)
    assert sample.checks == {"judge.c1": False}
    recorded = tmp_path / "eval" / "greet" / "sample-001.yaml"
    text = recorded.read_text()
    assert anthropic_key not in text and KEY not in text
    uris = [i["request"]["uri"] for i in yaml.safe_load(text)["interactions"]]
    assert [u.rsplit("/s/", 1)[1] for u in uris] == [
        "greet-1/v1/chat/completions",
        "greet-1-judge/v1/messages",
    ]
    assert "x-api-key: <redacted>" in text
    attempts = block_sockets(monkeypatch)
    monkeypatch.setenv("CI", "1")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    again = replay_sample(load_scenario(path), recorded)
    assert (again.checks, again.failures) == (sample.checks, sample.failures)
    assert attempts == []


def test_without_base_url_the_judge_goes_where_the_adapter_s_variable_says(
    tmp_path: Path, recording: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with WireServer(AGENT) as server:
        path = tmp_path / "judged.yaml"
        path.write_text(SCENARIO.format(url=server.url).replace("    base_url:", "    # base_url:"))
        judge_url = server.open_session("the-judge", PASSING)
        monkeypatch.setenv("OPENAI_BASE_URL", judge_url)  # the run goes to --base-url
        sample = one_sample(server, path, tmp_path)
        server.assert_consumed("the-judge")
    assert sample.passed, sample.failures
    cassette = yaml.safe_load((tmp_path / "eval" / "judged" / "sample-001.yaml").read_text())
    assert cassette["metadata"]["openprogram"]["judge"]["base_url"] == judge_url


def test_a_judge_refused_with_429_is_retried_through_the_sample_s_client(
    tmp_path: Path, recording: None
) -> None:
    refused = {"wire": {"status": 429, "retry_after_ms": 20}, "text": "busy"}
    _, (sample,), folder = judged_eval(tmp_path, [[refused, *PASSING]])
    assert sample.passed, sample.failures
    assert [(r["status"], r["call"]) for r in sample.retries] == [(429, 3)], sample.retries
    cassette = yaml.safe_load((folder / "sample-001.yaml").read_text())
    assert len(cassette["interactions"]) == 3  # the refusal is in the metadata, not replayed
    assert cassette["metadata"]["openprogram"]["judge"]["interactions"] == [3]


def test_a_setup_mistake_stops_the_eval_before_the_judge_is_asked(
    tmp_path: Path, recording: None
) -> None:
    from openprogram_sim.eval import EvalSetupError

    with WireServer(AGENT) as server:
        path = tmp_path / "judged.yaml"
        path.write_text(SCENARIO.format(url=server.url))
        server.open_session("judged-1-judge", PASSING)
        options = EvalOptions(
            model="openai:gpt-4o-mini",
            base_url="http://127.0.0.1:9/v1",  # nothing listens there
            samples=1,
            out=tmp_path / "eval",
            retries=RetryPolicy(max_retries=0),
        )
        with pytest.raises(EvalSetupError) as caught:
            evaluate(load_scenario(path), options)
        assert server.session("judged-1-judge").requests == []
    assert "sample 1: no request reached the model (exec raised ModelError: " in str(caught.value)


def test_a_sample_its_judge_failed_becomes_a_regression_that_replays_the_verdict_offline(
    tmp_path: Path, recording: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with WireServer(AGENT) as server:
        path = tmp_path / "judged.yaml"
        path.write_text(SCENARIO.format(url=server.url))
        slug = scenario_slug(str(path))
        for i, reply in enumerate([PASSING, FAILING], 1):
            server.open_session(f"{slug}-{i}-judge", reply)
        options = EvalOptions(
            model="openai:gpt-4o-mini", base_url=server.url + "/s/{sample}/v1", samples=2,
            out=tmp_path / "eval",
        )  # fmt: skip
        result = evaluate(load_scenario(path), options)
    (regression,) = result.regressions
    assert (regression.count, regression.failed) == (1, ["judge.gives_date"])
    folder = tmp_path / "eval" / "regressions"
    written = yaml.safe_load(Path(regression.path).read_text())
    assert written["expect"]["judge"]["cassette"] == f"{slug}-1.cassette.yaml"
    assert (folder / f"{slug}-1.cassette.yaml").is_file()
    assert [list(t) for t in written["model"]] == [["tool_calls"], ["text"]]  # no judge turn
    assert KEY not in (folder / f"{slug}-1.cassette.yaml").read_text()
    # offline: the server is gone, sockets refused, no key, CI set
    attempts = block_sockets(monkeypatch)
    monkeypatch.setenv("CI", "1")
    monkeypatch.delenv("OPENAI_API_KEY")
    done = run_cli("run", str(regression.path), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith(f"FAIL  eval/regressions/{slug}-1.yaml"), done.stdout
    assert "- judge.gives_date: the judge (openai:gpt-4o-mini) said pass, score 3/5" in done.stdout
    assert "judge.names_status" not in done.stdout
    assert "never requested" not in done.stdout
    assert attempts == []


def test_the_judge_s_tokens_are_priced_into_the_sample_s_cost(
    tmp_path: Path, recording: None
) -> None:
    with WireServer(AGENT) as server:
        path = tmp_path / "judged.yaml"
        path.write_text(SCENARIO.format(url=server.url))
        server.open_session("judged-1-judge", PASSING)
        done, result = eval_once(server, path, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    (sample,) = result["sample_results"]
    assert not any(sample["usage"].values())  # the served agent reports no tokens
    assert sample["judge_model"] == "openai:gpt-4o-mini"
    assert sample["judge_usage"] == {"input": 150, "output": 40}
    assert sample["cost_usd"] == pytest.approx((150 * 0.15 + 40 * 0.60) / 1_000_000)
    assert "no price" not in done.stderr


def test_a_judge_model_without_a_price_is_said_once_and_adds_nothing(
    tmp_path: Path, recording: None
) -> None:
    with WireServer(AGENT) as server:
        path = tmp_path / "judged.yaml"
        text = SCENARIO.format(url=server.url).replace(
            "    model: openai:gpt-4o-mini\n", "    model: openai:my-own-judge\n"
        )
        path.write_text(text)
        server.open_session("judged-1-judge", PASSING)
        done = run_cli(
            "eval", str(path), "--model", "openai:gpt-4o-mini", "--samples", "1",
            "--base-url", server.url + "/s/{sample}/v1", "--out", str(tmp_path / "eval"),
            "--json", str(tmp_path / "results.json"),
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr.count("no price for the judge model openai:my-own-judge") == 1
    (result,) = json.loads((tmp_path / "results.json").read_text())["scenarios"]
    (sample,) = result["sample_results"]
    assert sample["judge_usage"] == {"input": 150, "output": 40}
    assert sample["cost_usd"] == 0.0
