from typing import ClassVar

import pytest
from pydantic import Field
from pydantic_settings import SettingsConfigDict

from sstools.common.runtime import load_settings
from sstools.common.settings import DatabaseSettings, LlmSettings, ServiceSettings


class ExampleSettings(ServiceSettings, DatabaseSettings):
    model_config = SettingsConfigDict(env_prefix="EXAMPLE_")
    service_name: ClassVar[str] = "example"

    grpc_port: int = Field(default=50099, ge=0, le=65535)


def test_service_fields_take_the_prefix_and_shared_fields_keep_their_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EXAMPLE_GRPC_PORT", "6000")
    monkeypatch.setenv("EXAMPLE_METRICS_PORT", "6001")
    monkeypatch.setenv("LOG_LEVEL", "debug")
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@db:5432/x")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317")
    settings = ExampleSettings()
    assert settings.ports() == {"metrics_port": 6001, "grpc_port": 6000}
    assert settings.log_level == "debug"
    assert settings.database_url == "postgresql://u@db:5432/x"
    assert settings.otel_exporter_otlp_endpoint == "http://collector:4317"


def test_unprefixed_service_field_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPC_PORT", "6000")
    assert ExampleSettings().grpc_port == 50099


@pytest.mark.parametrize(
    ("variable", "value", "field"),
    [
        ("EXAMPLE_GRPC_PORT", "70000", "grpc_port"),
        ("EXAMPLE_GRPC_PORT", "abc", "grpc_port"),
        ("LOG_LEVEL", "loud", "LOG_LEVEL"),
    ],
)
def test_bad_value_exits_2_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], variable: str, value: str, field: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SystemExit) as exit_info:
        load_settings(ExampleSettings)
    assert exit_info.value.code == 2
    message = capsys.readouterr().err
    assert message.startswith("example: invalid configuration:")
    assert field in message
    assert "Traceback" not in message


class ModelSettings(ServiceSettings, LlmSettings):
    model_config = SettingsConfigDict(env_prefix="EXAMPLE_")
    service_name: ClassVar[str] = "example"


def test_stop_sequences_are_a_json_list_of_at_most_four(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LLM_STOP", '["</s>", "\\nUser:"]')
    assert ModelSettings().llm_stop == ["</s>", "\nUser:"]
    monkeypatch.setenv("LLM_STOP", "[]")  # a model that refuses stop sequences gets none
    assert ModelSettings().llm_stop == []
    monkeypatch.setenv("LLM_STOP", '["a", "b", "c", "d", "e"]')
    with pytest.raises(SystemExit):
        load_settings(ModelSettings)
    assert "LLM_STOP" in capsys.readouterr().err
