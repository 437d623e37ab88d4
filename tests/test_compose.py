"""docker-compose.yml stays a valid PostgreSQL 16 service that TASKQUEUE_DSN can point at."""

from __future__ import annotations

from pathlib import Path

import yaml

from taskqueue.dsn import to_libpq

ROOT = Path(__file__).resolve().parent.parent


def load() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_has_a_postgres_16_service() -> None:
    doc = load()
    services = doc["services"]
    pg = [s for s in services.values() if str(s.get("image", "")).startswith("postgres:")]
    assert len(pg) == 1
    service = pg[0]
    assert service["image"].split(":", 1)[1].split("-")[0].split(".")[0] == "16"
    assert any(str(p).endswith(":5432") for p in service["ports"])
    env = service["environment"]
    assert {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"} <= set(env)
    assert "healthcheck" in service


def test_compose_credentials_form_a_dsn_documented_in_readme() -> None:
    env = next(iter(load()["services"].values()))["environment"]
    dsn = f"postgresql://{env['POSTGRES_USER']}:{env['POSTGRES_PASSWORD']}@localhost:5432/{env['POSTGRES_DB']}"
    assert to_libpq(dsn) == dsn
    compose_text = (ROOT / "docker-compose.yml").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "TASKQUEUE_DSN" in compose_text and "TASKQUEUE_DSN" in readme
    assert "docker compose" in readme or "docker-compose" in readme


def test_named_volumes_are_declared() -> None:
    doc = load()
    used = {
        v.split(":", 1)[0]
        for s in doc["services"].values()
        for v in s.get("volumes", [])
        if isinstance(v, str) and not v.startswith((".", "/"))
    }
    assert used <= set(doc.get("volumes") or {})
