"""The price table: the bundled file, its overrides (``--pricing FILE``, the pyproject's
``[tool.openprogram.pricing]``), bad tables named; and each sample's cost in the summary
and the JSON of a real eval over loopback (tokens from the served turns' ``usage:``)."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

import pytest
from test_eval_cli import WEIGHTED, run_eval, sessions_url

from openprogram_sim.eval import Price, load_pricing
from openprogram_sim.play import serve_scenario


def test_the_bundled_table_is_package_data_with_a_date_and_a_price_per_model() -> None:
    text = resources.files("openprogram_sim.eval").joinpath("pricing.toml").read_text("utf-8")
    data = tomllib.loads(text)
    assert data["date"] == "2025-09-01" and data["currency"] == "USD"
    table = load_pricing(start=Path("/"))
    assert set(table.models) == set(data["models"])
    assert len(table.models) >= 15
    for name, price in table.models.items():
        assert name.partition(":")[0] in ("openai", "anthropic", "gemini"), name
        assert 0 < price.input < price.output, name
        assert price.cache_read is not None and price.cache_read < price.input, name
        assert price.source.startswith("https://"), name
    assert table.files == ("openprogram_sim/eval/pricing.toml",)


def test_a_model_is_priced_by_its_entry_alias_or_undated_name_and_never_guessed() -> None:
    table = load_pricing(start=Path("/"))
    mini = table.models["openai:gpt-4o-mini"]
    assert table.price("openai:gpt-4o-mini") is mini
    assert table.price("openai-responses:gpt-4o-mini") is mini  # the same vendor's price
    assert table.price("openai:gpt-4o-mini-2024-07-18") is mini  # a dated snapshot
    assert table.key("anthropic:claude-3-5-haiku-20241022") == "anthropic:claude-3-5-haiku"
    assert table.key("google:gemini-2.5-flash") == "gemini:gemini-2.5-flash"
    for unknown in ("openai:ft:gpt-4o-mini:acme", "openai:gpt-9", "bedrock:anthropic.claude"):
        assert table.price(unknown) is None and table.cost(unknown, {"input": 5}) is None
    # 1M input at 0.15, 1M output at 0.60, 1M cached at 0.075; reasoning is part of output
    usage = {"input": 1_000_000, "output": 1_000_000, "cache_read": 1_000_000, "reasoning": 7}
    assert table.cost("openai:gpt-4o-mini", usage) == pytest.approx(0.825)
    # a cache price not listed is charged at the input price
    assert Price(input=2.0, output=4.0).cost({"cache_write": 500_000}) == pytest.approx(1.0)


def test_overrides_from_the_pyproject_then_each_pricing_file_later_wins(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.openprogram.pricing]\ndate = "2026-01-01"\n'
        '[tool.openprogram.pricing.models."openai:gpt-4o-mini"]\ninput = 1.0\noutput = 2.0\n'
        '[tool.openprogram.pricing.models."openai:our-tuned"]\ninput = 3.0\noutput = 6.0\n'
    )
    ours = tmp_path / "prices.toml"
    ours.write_text('[models."openai:our-tuned"]\ninput = 5.0\noutput = 9.0\ncache_read = 1\n')
    folder = tmp_path / "deep" / "er"
    folder.mkdir(parents=True)
    table = load_pricing([ours], start=folder)
    assert table.price("openai:gpt-4o-mini") == Price(
        input=1.0, output=2.0, source=f"{tmp_path / 'pyproject.toml'} [tool.openprogram.pricing]"
    )
    assert table.price("openai:our-tuned") == Price(
        input=5.0, output=9.0, cache_read=1.0, source=f"--pricing {ours}"
    )
    assert table.price("openai:gpt-4o") is not None  # the bundled entries stay
    assert table.date == "2026-01-01"
    assert table.files[1:] == (
        f"{tmp_path / 'pyproject.toml'} [tool.openprogram.pricing]",
        f"--pricing {ours}",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[models."openai:x"]\ninput = "cheap"\noutput = 1\n',
            "[models.'openai:x'] input = 'cheap' is not a price (dollars per million tokens, "
            "a number >= 0)",
        ),
        ('[models."openai:x"]\ninput = 1\n', "[models.'openai:x'] has no output price"),
        (
            '[models."openai:x"]\ninput = 1\noutput = 2\ncached = 0.5\n',
            "[models.'openai:x'] unknown key 'cached'; the keys are input, output, "
            "cache_read, cache_write, source",
        ),
        (
            '[models."gpt-4o"]\ninput = 1\noutput = 2\n',
            "model 'gpt-4o' is not PROVIDER:MODEL (e.g. \"openai:gpt-4o-mini\")",
        ),
        ('currency = "EUR"\n', "currency 'EUR': prices are in USD"),
        ("[prices]\n", "unknown key 'prices'; a price table has date, currency and"),
        ("input = [\n", "not TOML ("),
    ],
)
def test_a_bad_price_table_is_named_with_the_fix(tmp_path: Path, text: str, message: str) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    with pytest.raises(ValueError) as caught:
        load_pricing([bad], start=tmp_path)
    assert str(caught.value).startswith(f"--pricing {bad}: "), caught.value
    assert message in str(caught.value)


def usage_scenario(tmp_path: Path) -> Path:
    """The weighted scenario served with tokens on each turn: a sample that looks up uses
    50 in and 16 out, one that does not 20 in and 3 out."""
    text = WEIGHTED.read_text().replace(
        '  - text: "Order 42 has shipped."',
        '  - text: "Order 42 has shipped."\n    usage: {input: 30, output: 7}',
    )
    text = text.replace(
        "      - weight: 0.3\n        text:",
        "      - weight: 0.3\n        usage: {input: 20, output: 3}\n        text:",
    )
    text = text.replace(
        "      - weight: 0.7\n", "      - weight: 0.7\n        usage: {input: 20, output: 9}\n"
    )
    served = tmp_path / "tokens.yaml"
    served.write_text(text)
    return served


PRICES = '[models."openai:gpt-4o-mini"]\ninput = 1000.0\noutput = 2000.0\n'
"""A price that makes a loopback sample's cost visible: $0.001 per input token."""


@pytest.mark.slow
def test_each_sample_is_costed_in_the_summary_and_the_json(tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICES)
    with serve_scenario(usage_scenario(tmp_path)) as server:
        done, data = run_eval(
            tmp_path, sessions_url(server), "--samples", "4", "--pricing", str(prices)
        )
    (result,) = data["scenarios"]
    costs = []
    for sample in result["sample_results"]:
        hit = sample["checks"]["trajectory"]
        want = (50 * 1000 + 16 * 2000) / 1e6 if hit else (20 * 1000 + 3 * 2000) / 1e6
        assert sample["cost_usd"] == pytest.approx(want)
        costs.append(want)
    assert result["cost_usd"] == pytest.approx(sum(costs))
    assert data["cost"]["spent_usd"] == pytest.approx(sum(costs))
    assert data["cost"]["pricing"] == {
        "model": "openai:gpt-4o-mini",
        "entry": "openai:gpt-4o-mini",
        "price": {"input": 1000.0, "output": 2000.0, "per": "1M tokens",
                  "source": f"--pricing {prices}"},
        "date": "2025-09-01",
        "files": ["openprogram_sim/eval/pricing.toml", f"--pricing {prices}"],
    }  # fmt: skip
    total = sum(costs)
    assert f"; cost ${total:.4f} (${total / 4:.4f} a sample)" in done.stdout
    assert f"(openai:gpt-4o-mini, 4 samples; ${total:.4f} spent; cassettes under" in done.stdout
    assert "no price" not in done.stderr


@pytest.mark.slow
def test_an_unknown_model_is_said_once_and_reports_tokens_without_a_cost(tmp_path: Path) -> None:
    with serve_scenario(usage_scenario(tmp_path)) as server:
        done, data = run_eval(
            tmp_path, sessions_url(server), "--samples", "3", model="openai:our-finetune"
        )
    assert done.stderr == (
        "openprogram-sim eval: no price for openai:our-finetune in the pricing table (dated "
        "2025-09-01); tokens are reported without a cost (give one with --pricing FILE or "
        "[tool.openprogram.pricing] in pyproject.toml)\n"
    )
    (result,) = data["scenarios"]
    assert result["cost_usd"] is None and result["usage"]["input"] > 0
    assert [s["cost_usd"] for s in result["sample_results"]] == [None, None, None]
    assert data["cost"]["spent_usd"] is None and data["cost"]["pricing"]["price"] is None
    assert "; no price for the model" in done.stdout
    assert " spent;" not in done.stdout


@pytest.mark.slow
def test_the_pyproject_table_prices_an_eval_run_from_its_folder(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[tool.openprogram.pricing.models."openai:our-finetune"]\ninput = 500\noutput = 500\n'
    )
    served = usage_scenario(tmp_path)
    with serve_scenario(served) as server:
        done, data = run_eval(
            tmp_path, sessions_url(server), "--samples", "2", model="openai:our-finetune",
            scenario=served, cwd=project,
        )  # fmt: skip
    (result,) = data["scenarios"]
    tokens = result["usage"]["input"] + result["usage"]["output"]
    assert result["cost_usd"] == pytest.approx(tokens * 500 / 1e6)
    assert done.stderr == ""


def test_a_missing_pricing_file_and_a_pyproject_pricing_that_is_no_table_are_named(
    tmp_path: Path,
) -> None:
    with pytest.raises(ValueError) as caught:
        load_pricing([tmp_path / "nowhere.toml"], start=tmp_path)
    assert str(caught.value) == (
        f"--pricing {tmp_path / 'nowhere.toml'}: cannot read it (No such file or directory)"
    )
    (tmp_path / "pyproject.toml").write_text('[tool.openprogram]\npricing = "prices.toml"\n')
    with pytest.raises(ValueError) as caught:
        load_pricing(start=tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / 'pyproject.toml'}: [tool.openprogram] pricing must be a table "
        '([tool.openprogram.pricing.models."PROVIDER:MODEL"])'
    )
    # the nearest [tool.openprogram] table decides: one without pricing keeps the bundled
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "pyproject.toml").write_text("[tool.openprogram]\npythonpath = []\n")
    assert load_pricing(start=tmp_path / "inner").files == ("openprogram_sim/eval/pricing.toml",)
