"""Settings layering: config file, then environment, then flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from vtop.core.config.settings import Settings, SettingsError, config_path, load_settings


def write_config(tmp_path: Path, text: str) -> dict[str, str]:
    """An environment whose config file holds `text`."""
    path = tmp_path / "vtop" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return {"XDG_CONFIG_HOME": str(tmp_path)}


def test_defaults_without_file_env_or_flags(tmp_path: Path) -> None:
    assert load_settings({}, {"XDG_CONFIG_HOME": str(tmp_path)}) == Settings()


def test_file_then_env_then_flags(tmp_path: Path) -> None:
    env = write_config(
        tmp_path, 'urls = ["http://a:8000", "http://b:8000"]\ninterval_s = 5\nwindow_s = 30\n'
    )
    from_file = load_settings({}, env)
    assert from_file.urls == ("http://a:8000", "http://b:8000") and from_file.interval_s == 5.0
    env |= {"VTOP_INTERVAL": "2", "VTOP_LOW_REDRAW": "yes", "VLLM_API_KEY": "secret"}
    from_env = load_settings({}, env)
    assert from_env.interval_s == 2.0 and from_env.low_redraw and from_env.api_key == "secret"
    assert from_env.window_s == 30.0
    flagged = load_settings({"interval_s": 0.5, "urls": None, "hidden_panels": "gpu,kv"}, env)
    assert flagged.interval_s == 0.5 and flagged.hidden_panels == ("gpu", "kv")
    assert flagged.urls == ("http://a:8000", "http://b:8000")


def test_config_path_order(tmp_path: Path) -> None:
    assert config_path({"VTOP_CONFIG": "/x/y.toml"}) == Path("/x/y.toml")
    assert config_path({"XDG_CONFIG_HOME": "/cfg"}) == Path("/cfg/vtop/config.toml")
    assert config_path({}).parts[-3:] == (".config", "vtop", "config.toml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("interval = 1\n", "unknown setting(s) interval"),
        ("interval_s = 'fast'\n", "interval_s = 'fast'"),
        ("interval_s = \n", "config.toml"),
        ("hidden_panels = ['charts']\n", "unknown panel(s) charts"),
        ("interval_s = -1\n", "config.toml:1: interval_s = -1: must be a positive number"),
        ("interval_s = true\n", "config.toml:1: interval_s = True: expected float"),
        ("# mine\nrules_dir = 42\n", "config.toml:2: rules_dir = 42: expected a list of strings"),
        ("history_s = -5\n", "config.toml:1: history_s = -5: must be a positive number"),
        (
            "# spans\notlp = ['zipkin://a:9411']\n",
            "config.toml:2: otlp: zipkin://a:9411: the scheme",
        ),
        ("otlp = ['grpc://127.0.0.1']\n", "give a port"),
        ("sample_limit = 0\n", "config.toml:1: sample_limit = 0: must be a positive whole number"),
        ("sample_limit = 'many'\n", "config.toml:1: sample_limit = 'many'"),
        ("sample_limit = true\n", "config.toml:1: sample_limit = True"),
    ],
)
def test_bad_config_names_the_file_and_setting(tmp_path: Path, text: str, message: str) -> None:
    env = write_config(tmp_path, text)
    with pytest.raises(SettingsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_settings({}, env)


def test_bad_env_value_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"\$VTOP_LOW_REDRAW"):
        load_settings({}, {"XDG_CONFIG_HOME": str(tmp_path), "VTOP_LOW_REDRAW": "maybe"})


def test_a_config_file_that_is_not_text_or_not_a_file_is_named(tmp_path: Path) -> None:
    env = write_config(tmp_path, "")
    config = config_path(env)
    config.write_bytes(b"interval_s = 2\nurls = ['\xff\xfe']\n")
    with pytest.raises(SettingsError, match=r"config.toml:2: not UTF-8"):
        load_settings({}, env)
    config.unlink()
    config.mkdir()
    with pytest.raises(SettingsError, match=r"config\.toml: not a file"):
        load_settings({}, env)


def test_a_missing_file_named_by_vtop_config_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"nope.toml: no such file \(named by \$VTOP_CONFIG\)"):
        load_settings({}, {"VTOP_CONFIG": str(tmp_path / "nope.toml")})


def test_the_span_receivers_are_read_as_addresses(tmp_path: Path) -> None:
    env = write_config(tmp_path, "otlp = ['grpc://:4317', 'http://0.0.0.0:4318/v1/traces']\n")
    settings = load_settings({"otlp_token": "s3cret-token"}, env)
    assert settings.otlp == ("grpc://127.0.0.1:4317", "http://0.0.0.0:4318")
    assert settings.otlp_token == "s3cret-token"


def test_the_sample_limit_from_the_file_and_the_environment(tmp_path: Path) -> None:
    env = write_config(tmp_path, "sample_limit = 500000\n")
    assert load_settings({}, env).sample_limit == 500_000
    assert load_settings({}, env | {"VTOP_SAMPLE_LIMIT": "2000"}).sample_limit == 2_000
    with pytest.raises(SettingsError, match=r"\$VTOP_SAMPLE_LIMIT"):
        load_settings({}, env | {"VTOP_SAMPLE_LIMIT": "1e9x"})
