"""The triage page end to end in headless Chromium: gateway, scripted upstream, page."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from slotflight.testing import AppServer, Reply, ScriptedServer
from slotflight.web import create_app
from tests.web_support import TRIAGE_VALUE, triage_frames

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

LEAVES = {
    "/summary": TRIAGE_VALUE["summary"],
    "/sentiment": TRIAGE_VALUE["sentiment"],
    "/priority": str(TRIAGE_VALUE["priority"]),
    "/tags/0": TRIAGE_VALUE["tags"][0],
    "/tags/1": TRIAGE_VALUE["tags"][1],
    **{
        f"/action_items/{i}/{key}": item[key]
        for i, item in enumerate(TRIAGE_VALUE["action_items"])
        for key in ("task", "owner", "due")
    },
}


@pytest.fixture(scope="module")
def chromium_path() -> str:
    if not os.path.exists(CHROMIUM) and shutil.which("chromium") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("Chromium is not installed (CI=true: the browser test must run)")
        pytest.skip("Chromium is not installed at /usr/bin/chromium")
    return CHROMIUM if os.path.exists(CHROMIUM) else str(shutil.which("chromium"))


def test_page_fills_the_object_field_by_field(chromium_path: str) -> None:
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    reply = Reply(triage_frames(), chunks=4, chunk_delay=0.01)
    with (
        ScriptedServer([reply]) as upstream,
        AppServer(create_app(upstream.base_url)) as gateway,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=chromium_path, args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.goto(gateway.url + "/")
            page.fill("#ticket", "Our export keeps timing out. The audit is on Friday.")
            page.click("#run")
            page.wait_for_function(
                "document.querySelector('#status').textContent.startsWith('done')",
                timeout=20_000,
            )
            shown = {
                pointer: page.inner_text(f'.field[data-path="{pointer}"] .value')
                for pointer in LEAVES
            }
            complete = page.eval_on_selector_all(
                ".field.complete", "nodes => nodes.map(n => n.dataset.path)"
            )
            timings = page.eval_on_selector_all(
                ".field.complete .ms", "nodes => nodes.map(n => n.textContent)"
            )
            first = page.inner_text("#t-first")
            page.screenshot(path=str(ARTIFACTS / "page.png"), full_page=True)
        finally:
            browser.close()

    assert shown == LEAVES
    assert sorted(complete) == sorted(LEAVES)
    assert len(timings) == len(LEAVES) and all(t.endswith(" ms") for t in timings)
    assert first.endswith(" ms")
    sent = upstream.request(0).body
    assert any("Our export keeps timing out" in m["content"] for m in sent["messages"])
    assert (ARTIFACTS / "page.png").stat().st_size > 0
