"""The triage page end to end in headless Chromium: gateway, scripted upstream, page.

The page builds the object from the lean patch-mode messages with ``slotflight.js`` (the browser build of ``clients/js``);
the test checks that it equals the object the server sent, field by field on screen
and as a whole."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import httpx
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

#: A summary long enough to stream as many deltas (and to be coalesced).
LONG_VALUE: dict[str, Any] = {
    **TRIAGE_VALUE,
    "summary": " ".join(f"Export step {i} times out after ten minutes;" for i in range(60))
    + " ünïcödé ✓ end.",
}


def leaves(value: dict[str, Any]) -> dict[str, str]:
    return {
        "/summary": value["summary"],
        "/sentiment": value["sentiment"],
        "/priority": str(value["priority"]),
        "/tags/0": value["tags"][0],
        "/tags/1": value["tags"][1],
        **{
            f"/action_items/{i}/{key}": item[key]
            for i, item in enumerate(value["action_items"])
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


def test_page_builds_the_servers_object_from_lean_messages(chromium_path: str) -> None:
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    reply = Reply(triage_frames(LONG_VALUE), chunks=4, chunk_delay=0.002)
    with (
        ScriptedServer([reply]) as upstream,
        AppServer(create_app(upstream.base_url)) as gateway,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=chromium_path, args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            responses: list[Any] = []
            page.on("response", lambda r: responses.append(r) if "slot-streams" in r.url else None)
            page.goto(gateway.url + "/")
            page.fill("#ticket", "Our export keeps timing out. The audit is on Friday.")
            page.click("#run")
            page.wait_for_function("window.triagePage.last !== null", timeout=30_000)
            result = page.evaluate("() => window.triagePage")
            status = page.inner_text("#status")
            page.wait_for_timeout(100)  # one animation frame for the last redraw
            shown = {
                pointer: page.inner_text(f'.field[data-path="{pointer}"] .value')
                for pointer in leaves(LONG_VALUE)
            }
            complete = page.eval_on_selector_all(
                ".field.complete", "nodes => nodes.map(n => n.dataset.path)"
            )
            page.screenshot(path=str(ARTIFACTS / "page.png"), full_page=True)
        finally:
            browser.close()
        # The server's own record of the stream, read again from its store.
        location = responses[0].headers["location"]
        with httpx.Client(base_url=gateway.url, timeout=30) as client:
            replay = client.get(location, params={"last_event_id": "0"}).text

    messages = [json.loads(line[6:]) for line in replay.splitlines() if line.startswith("data: ")]
    server_final = messages[-1]
    assert server_final["type"] == "done" and status.startswith("done")
    assert result["last"]["type"] == "done"
    assert result["object"] == server_final["state"] == LONG_VALUE
    assert result["mismatches"] == 0  # every snapshot equalled what the deltas built
    deltas = [m for m in messages if m["type"] == "slot-delta"]
    assert len(deltas) > 5 and all("value" not in m and "state" not in m for m in deltas)
    assert result["messages"] == len(messages)
    assert shown == leaves(LONG_VALUE)
    assert sorted(complete) == sorted(leaves(LONG_VALUE))
    sent = upstream.request(0).body
    assert any("Our export keeps timing out" in m["content"] for m in sent["messages"])
    assert (ARTIFACTS / "page.png").stat().st_size > 0
