"""The quality asset and its checks in the Dagster UI, as the operator sees them.

A real git history swept twice through the real ``sweep`` job (a second commit between
the sweeps), so ``retrieval_quality`` holds two evaluations at two revisions; then a worse
embedding generation (4-dimension hashing vectors) is built, which the ``quality_gate``
check refuses (WARN). A real ``dagster-webserver`` serves that instance and headless
Chromium renders the asset's plots (recall@1/5/10, MRR@10 over time) and its checks. The
screenshots are saved in the test's tmp dir; with NEO_UPDATE_UI_SCREENSHOT=1 they refresh
``docs/ui-retrieval-quality.png`` and ``docs/ui-quality-gate-check.png``.
"""

import base64
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import dagster as dg
import pytest

from neo_assets.cli.launch import run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.defs.test_ui import (
    CHROMIUM,
    _png_size,
    dagster_webserver,
    instance_env,
)
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.quality.test_quality_gate_e2e import TOPICS, source
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

ROOT = Path(__file__).resolve().parents[2]
PARTITION = "acme/tools"
DOCS = ROOT / "docs"
# Topics changed before the first sweep; the rest land between the two sweeps.
FIRST = 5


def _page(view: str) -> str:
    return f"/assets/retrieval_quality?view={view}&partition={quote(PARTITION, safe='')}"


def _sweep(env: dict[str, str], *, force: bool = False) -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith("NEO_"):
                mp.delenv(name)
        for name, value in env.items():
            if name.startswith("NEO_") or name == "DAGSTER_HOME":
                mp.setenv(name, value)
        instance = dg.DagsterInstance.from_config(env["DAGSTER_HOME"])
        try:
            [result] = run_sweeps(
                load_settings(), load_tenants(Path(env["NEO_TENANTS_FILE"])), instance, force=force
            )
            records = instance.fetch_materializations(
                dg.AssetKey("retrieval_quality"), limit=10
            ).records
            checks = {
                e.dagster_event.event_specific_data.check_name: e.dagster_event.event_specific_data
                for e in instance.all_logs(
                    result["runId"], of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
                )
            }
        finally:
            instance.dispose()
    assert result["outcome"] == "complete", result
    return {"materializations": [r.asset_materialization for r in records], "checks": checks}


@pytest.fixture(scope="module")
def quality_world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("quality-ui")
    repo = GitRepo(base / "tools")
    when = 1_700_000_000
    repo.write("pkg/tools.py", source(0))
    repo.commit("initial import of the toolbox", when=when)
    for i, (_, _, subject) in enumerate(TOPICS[:FIRST]):
        repo.write("pkg/tools.py", source(i + 1))
        repo.commit(subject, when=when + 10 * (i + 1))
    tenants = write_tenants(
        base / "tenants.yaml", {"acme": [repo_entry("tools", repo.path, version="2.0.0")]}
    )
    home = base / "neo"
    env = instance_env(
        home,
        tenants,
        NEO_CHROMA_LOCAL="embedded",
        NEO_SERVE_HYBRID="false",  # the vectors alone answer
        # The scene (no drop between the two evaluations, a refused switch) was built on
        # v1's figures; what is shown is the asset and its checks, not the embedder.
        NEO_EMBEDDING_MODEL="neo-hashing-v1",
    )
    first = _sweep(env)
    first_rev = repo.head()
    for i, (_, _, subject) in enumerate(TOPICS[FIRST:], start=FIRST):
        repo.write("pkg/tools.py", source(i + 1))
        repo.commit(subject, when=when + 10 * (i + 1))
    second = _sweep(env)
    env["NEO_EMBEDDING_DIMENSIONS"] = "4"  # a generation that answers worse
    worse = _sweep(env, force=True)
    return {
        "base": base,
        "env": env,
        "revisions": [first_rev, repo.head()],
        "first": first,
        "second": second,
        "worse": worse,
    }


def test_two_sweeps_plot_two_evaluations_and_the_worse_generation_fails_the_gate(
    quality_world,
) -> None:
    second = quality_world["second"]["materializations"]
    serving = [m for m in second if "recall_at_10" in m.metadata]
    assert len(serving) == 2, [m.metadata for m in second]
    # Newest first: one point per revision, with the figures the UI plots.
    assert [m.metadata["revision"].value for m in serving] == quality_world["revisions"][::-1]
    assert [m.metadata["questions"].value for m in serving] == [len(TOPICS), FIRST]
    for m in serving:
        for name in ("recall_at_1", "recall_at_5", "recall_at_10", "mrr_at_10"):
            assert isinstance(m.metadata[name], dg.FloatMetadataValue), name
    checks = quality_world["worse"]["checks"]
    gate = checks["quality_gate"]
    assert not gate.passed and gate.severity == dg.AssetCheckSeverity.WARN
    assert "answers worse than" in gate.metadata["summary"].value
    assert "retrieval_quality_drop" in checks


@pytest.fixture(scope="module")
def webserver(quality_world) -> Iterator[dict[str, Any]]:
    with dagster_webserver(quality_world["env"], quality_world["base"]) as running:
        yield running


class _Browser:
    """Headless Chromium driven over the DevTools protocol on --remote-debugging-pipe
    (fds 3/4, NUL-separated JSON): the Plots toggle and the summary's Markdown are React
    state a URL cannot select, so the test clicks them as an operator would."""

    def __init__(self, profile: Path) -> None:
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()

        def at_3_and_4() -> None:  # via fds past any low one, so neither dup2 clobbers
            os.dup2(to_r, 100)
            os.dup2(from_w, 101)
            os.dup2(100, 3)
            os.dup2(101, 4)

        self.proc = subprocess.Popen(
            [
                str(CHROMIUM),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                "--window-size=1600,1000",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            preexec_fn=at_3_and_4,
            close_fds=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_r)
        os.close(from_w)
        self.out = os.fdopen(to_w, "wb", buffering=0)
        self.inp = os.fdopen(from_r, "rb", buffering=0)
        self.buf = b""
        self.n = 0
        self.session: str | None = None
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)[
            "sessionId"
        ]
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=1600,
            height=1000,
            deviceScaleFactor=1,
            mobile=False,
        )

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.n += 1
        msg: dict[str, Any] = {"id": self.n, "method": method, "params": params}
        if self.session:
            msg["sessionId"] = self.session
        self.out.write(json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self.buf:
                chunk = self.inp.read(65536)
                if not chunk:
                    raise RuntimeError(f"chromium closed the DevTools pipe during {method}")
                self.buf += chunk
            raw, self.buf = self.buf.split(b"\0", 1)
            doc = json.loads(raw)
            if doc.get("id") == self.n:
                if "error" in doc:
                    raise RuntimeError(f"{method}: {doc['error']}")
                return doc["result"]

    def js(self, expr: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expr, returnByValue=True)
        return result.get("result", {}).get("value")

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def text(self) -> str:
        return self.js("document.body ? document.body.innerText : ''") or ""

    def wait_text(self, *needles: str, timeout: float = 90.0) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.text()
            if all(n in text for n in needles):
                return text
            time.sleep(0.5)
        return text

    def click(self, selector: str, label: str) -> bool:
        return bool(
            self.js(
                f"(() => {{ const e = [...document.querySelectorAll({json.dumps(selector)})]"
                f".find(e => e.innerText.trim() === {json.dumps(label)});"
                " if (e) e.click(); return !!e; })()"
            )
        )

    def scroll_to(self, label: str) -> bool:
        return bool(
            self.js(
                "(() => { const e = [...document.querySelectorAll('div, span, h1, h2, h3, h4')]"
                ".find(e => e.childElementCount === 0"
                f" && e.innerText.trim() === {json.dumps(label)});"
                " if (e) e.scrollIntoView({block: 'start'}); return !!e; })()"
            )
        )

    def shot(self, path: Path) -> bytes:
        data = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        path.write_bytes(data)
        return data

    def close(self) -> None:
        self.session = None
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=20)
        self.out.close()
        self.inp.close()


def _keep(shot: Path, data: bytes, docs_name: str) -> None:
    assert _png_size(data) == (1600, 1000)
    assert 20_000 < len(data) < 600_000  # a rendered page, not a blank one; docs-sized
    if os.environ.get("NEO_UPDATE_UI_SCREENSHOT") == "1":
        DOCS.mkdir(exist_ok=True)
        shutil.copyfile(shot, DOCS / docs_name)


CHROMIUM_MISSING = (
    "Debian's chromium is not installed at /usr/bin/chromium (apt-get install chromium)"
)


@pytest.mark.skipif(not CHROMIUM.exists(), reason=CHROMIUM_MISSING)
def test_chromium_plots_recall_and_mrr_on_the_retrieval_quality_page(webserver) -> None:
    base: Path = webserver["base"]
    browser = _Browser(base / "profile-plots")
    try:
        browser.goto(webserver["url"] + _page("overview"))
        text = browser.wait_text("Metadata", "recall_at_10", "acme/tools")
        assert "retrieval_quality" in text and "acme/tools" in text, text[:3000]
        assert browser.click("button", "Plots"), text[:3000]
        browser.wait_text("Partitions\nEvents")
        assert browser.click("button", "Events")  # over time, one point per evaluation
        text = browser.wait_text("mrr_at_10\nquestions\nrecall_at_1")
        for name in ("mrr_at_10", "recall_at_1", "recall_at_5", "recall_at_10"):
            assert f"\n{name}\n" in text, (name, text[:3000])
        assert browser.scroll_to("mrr_at_10")
        time.sleep(2.0)  # the charts' draw after the scroll
        shot = base / "ui-retrieval-quality.png"
        _keep(shot, browser.shot(shot), "ui-retrieval-quality.png")
    finally:
        browser.close()


@pytest.mark.skipif(not CHROMIUM.exists(), reason=CHROMIUM_MISSING)
def test_chromium_shows_the_quality_gate_check_failed_with_its_reason(webserver) -> None:
    base: Path = webserver["base"]
    browser = _Browser(base / "profile-checks")
    try:
        browser.goto(webserver["url"] + _page("checks") + "&checkDetail=quality_gate")
        # The list of checks loads apart from the detail: wait for both.
        text = browser.wait_text(
            "Latest execution",
            "refused",
            "quality_gate\nFailed",
            "retrieval_quality_drop\nSucceeded",
        )
        assert "quality_gate\nFailed" in text, text[:3000]
        assert "retrieval_quality_drop\nSucceeded" in text, text[:3000]
        assert browser.click("button, a, span", "[Show Markdown]"), text[:3000]
        text = browser.wait_text("answers worse than")
        assert "answers worse than" in text and "neo-assets quality allow" in text, text[:3000]
        assert re.search(r"MRR@10 0\.\d+", text), text[:3000]  # a figure
        time.sleep(1.5)  # the dialog's fade-in
        shot = base / "ui-quality-gate-check.png"
        _keep(shot, browser.shot(shot), "ui-quality-gate-check.png")
    finally:
        browser.close()
