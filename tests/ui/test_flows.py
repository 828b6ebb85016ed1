"""The admin UI driven as a person drives it — by role, label and visible text — against the
real binary on both stores, with the admin API checked afterwards; axe-core on every page in
both themes, no console error, screenshots under target/ui-screenshots/."""

from __future__ import annotations

import http.server
import json
import time
import threading
import urllib.request
import uuid

import pytest
from playwright.sync_api import expect

from conftest import audit, sign_in


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_browser_starts(browser):
    """Playwright 1.65.2 with Debian's Chromium: fails loudly when the pair stops working."""
    assert browser.version.split(".")[0].isdigit()


def test_root_sends_browsers_to_the_ui_and_api_clients_get_json(server, watched):
    page = watched.page
    page.goto(server.url + "/")
    expect(page.get_by_role("heading", name="Sign in", level=1)).to_be_visible()
    request = urllib.request.Request(server.url + "/", headers={"Accept": "application/json"})
    try:
        urllib.request.urlopen(request, timeout=5)
        raise AssertionError("expected 404")
    except urllib.error.HTTPError as e:
        assert e.code == 404
        assert e.headers["Content-Type"].startswith("application/json")


def test_sign_in_keyboard_and_sign_out(server, watched):
    page = watched.page
    watched.allowed.append("422")
    page.goto(server.url + "/ui/toggles")
    # Not signed in: sent to the sign-in page; an empty name is refused next to the field.
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("Enter a name of 1 to 100 characters.").first).to_be_visible()
    audit(page, f"sign-in-{server.store}")
    page.get_by_label("Your name").fill("Kim Keyboard")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Toggles", level=1)).to_be_visible()
    # The first Tab reaches the skip link; "/" focuses the search.
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.locator("body").click(position={"x": 5, "y": 300})
    page.keyboard.press("/")
    expect(page.get_by_label("Search toggles")).to_be_focused()
    expect(page.get_by_role("link", name="Toggles")).to_have_attribute("aria-current", "page")
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in", level=1)).to_be_visible()
    page.goto(server.url + "/ui/toggles")
    expect(page.get_by_role("heading", name="Sign in", level=1)).to_be_visible()


def test_token_mode_signs_in_with_an_admin_token_only(token_server, watched):
    page = watched.page
    watched.allowed.append("422")
    page.goto(token_server.url + "/ui/sign-in")
    page.get_by_label("Admin API token").fill("not-a-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("This is not a valid admin token").first).to_be_visible()
    page.get_by_label("Admin API token").fill(token_server.token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Toggles", level=1)).to_be_visible()


def test_create_find_and_switch_on_in_one_environment(server, watched):
    page = watched.page
    sign_in(page, server)
    name = unique("checkout")
    page.get_by_role("link", name="New toggle").first.click()
    expect(page.get_by_role("heading", name="New toggle", level=1)).to_be_visible()
    # The check as you type is htmx's: typing before it has set up the field would go
    # unheard. The link is boosted (no page load to wait for): wait until htmx has processed
    # the field (it keeps its own data on the element once it has).
    page.wait_for_function(
        "() => { const e = document.getElementById('f-name');"
        " return !!(e && e['htmx-internal-data'] && e['htmx-internal-data'].initHash); }")
    page.get_by_label("Name").fill(name)
    expect(page.get_by_text(f"“{name}” is free.")).to_be_visible()
    page.get_by_label("Description (optional)").fill("The new checkout flow")
    audit(page, f"new-toggle-{server.store}")
    page.get_by_role("button", name="Create toggle").click()
    expect(page.get_by_role("heading", name=name, level=1)).to_be_visible()
    # Find it in the list by a word of its description, and switch it on in production.
    page.get_by_role("link", name="Toggles").click()
    expect(page.get_by_role("heading", name="Toggles", level=1)).to_be_visible()
    page.get_by_label("Search toggles").fill("checkout flow " + name[-8:])
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_text("1 toggles match")).to_be_visible()
    switch = page.get_by_role("switch", name=f"{name} in production")
    expect(switch).to_have_attribute("aria-checked", "false")
    switch.click()
    expect(page.get_by_role("switch", name=f"{name} in production")).to_have_attribute("aria-checked", "true")
    audit(page, f"toggles-{server.store}")
    feature = server.api("GET", f"/api/admin/projects/default/features/{name}", expect=200)
    environments = {e["name"]: e["enabled"] for e in feature["environments"]}
    assert environments["production"] is True
    assert environments["development"] is False


def test_a_refused_name_keeps_what_was_typed(server, watched):
    page = watched.page
    watched.allowed.append("422")
    sign_in(page, server)
    page.goto(server.url + "/ui/new-toggle")
    page.get_by_label("Name").fill("has space")
    page.get_by_label("Description (optional)").fill("kept description")
    page.get_by_role("button", name="Create toggle").click()
    expect(page.get_by_role("alert")).to_contain_text("Nothing was saved")
    expect(page.get_by_label("Name")).to_have_value("has space")
    expect(page.get_by_label("Description (optional)")).to_have_value("kept description")
    expect(page.get_by_label("Name")).to_have_attribute("aria-invalid", "true")


def test_rollout_strategy_with_a_constraint_a_segment_and_variants(server, watched):
    name = unique("rollout")
    server.api("POST", "/api/admin/projects/default/features", {"name": name}, expect=201)
    segment = server.api("POST", "/api/admin/segments", {
        "name": unique("beta-users"), "constraints": [
            {"contextName": "userId", "operator": "IN", "values": ["u1"]}]}, expect=(200, 201))
    page = watched.page
    watched.allowed.append("422")
    sign_in(page, server)
    page.goto(f"{server.url}/ui/toggles/{name}")
    production = page.get_by_role("article", name="production")
    production.get_by_text("Add a strategy in production").click()
    production.get_by_label("Rollout (%)").fill("50")
    production.get_by_label("Context field 1").select_option("userId")
    production.get_by_label("Operator 1").select_option("IN")
    production.get_by_label("Values 1 (one a line)").fill("u1\nu2")
    production.get_by_label(segment["name"]).check()
    # Weights that do not add up are refused, with what was typed kept.
    production.get_by_label("Variant 1 name").fill("blue")
    production.get_by_label("Variant 1 weight (%)").fill("30")
    production.get_by_label("Variant 2 name").fill("green")
    production.get_by_label("Variant 2 weight (%)").fill("30")
    production.get_by_role("button", name="Add strategy in production").click()
    production = page.get_by_role("article", name="production")
    expect(production.get_by_text("they must add up to 100%").first).to_be_visible()
    expect(production.get_by_label("Variant 1 name")).to_have_value("blue")
    production.get_by_label("Variant 2 weight (%)").fill("70")
    production.get_by_role("button", name="Add strategy in production").click()
    expect(page.get_by_role("status").first).to_contain_text("Strategy added in production")
    audit(page, f"toggle-{server.store}")
    strategies = server.api(
        "GET", f"/api/admin/projects/default/features/{name}/environments/production/strategies",
        expect=200)
    assert len(strategies) == 1
    strategy = strategies[0]
    assert strategy["parameters"]["rollout"] == "50"
    assert strategy["constraints"][0]["contextName"] == "userId"
    assert strategy["constraints"][0]["values"] == ["u1", "u2"]
    assert strategy["segments"] == [segment["id"]]
    assert sorted(v["name"] for v in strategy["variants"]) == ["blue", "green"]
    assert sum(v["weight"] for v in strategy["variants"]) == 1000


def test_tag_stale_archive_and_revive(server, watched):
    name = unique("lifecycle")
    server.api("POST", "/api/admin/projects/default/features", {"name": name}, expect=201)
    page = watched.page
    sign_in(page, server)
    page.goto(f"{server.url}/ui/toggles/{name}")
    page.get_by_label("Tag value").fill("team-a")
    page.get_by_role("button", name="Add tag").click()
    expect(page.get_by_text("simple:team-a").first).to_be_visible()
    page.get_by_role("button", name="Mark stale").click()
    expect(page.get_by_role("button", name="Mark not stale")).to_be_visible()
    feature = server.api("GET", f"/api/admin/features/{name}", expect=200)
    assert feature["stale"] is True
    assert {"type": "simple", "value": "team-a"} in [
        {"type": t["type"], "value": t["value"]} for t in feature["tags"]]
    page.get_by_role("button", name="Archive").click()  # the confirmation is accepted
    expect(page.get_by_role("heading", name="Archive", level=1)).to_be_visible()
    server.api("GET", f"/api/admin/features/{name}", expect=404)
    audit(page, f"archive-{server.store}")
    page.get_by_role("button", name=f"Revive {name}").click()
    expect(page.get_by_role("heading", name=name, level=1)).to_be_visible()
    server.api("GET", f"/api/admin/features/{name}", expect=200)
    # The history shows each change; usage and SDK reach have their sections.
    expect(page.locator("ol.history").get_by_text("feature-stale-on").first).to_be_visible()
    expect(page.get_by_role("heading", name="Does it reach the SDKs?")).to_be_visible()


def test_bulk_actions_on_selected_rows(server, watched):
    prefix = unique("bulk")
    names = [f"{prefix}-{i}" for i in range(3)]
    for name in names:
        server.api("POST", "/api/admin/projects/default/features", {"name": name}, expect=201)
    page = watched.page
    sign_in(page, server)
    page.goto(f"{server.url}/ui/toggles?q={prefix}")
    page.get_by_label(f"Select {names[0]}").check()
    page.get_by_label(f"Select {names[1]}").check()
    page.get_by_label("Action").select_option("enable")
    page.get_by_label("Environment (switch on/off, export)").select_option("development")
    page.get_by_role("button", name="Apply to selected").click()
    expect(page.get_by_role("status").first).to_contain_text("applied to 2 of 2")
    page.get_by_label(f"Select {names[2]}").check()
    page.get_by_label("Action").select_option("stale")
    page.get_by_role("button", name="Apply to selected").click()
    expect(page.get_by_role("status").first).to_contain_text("applied to 1 of 1")
    for i, name in enumerate(names):
        feature = server.api("GET", f"/api/admin/projects/default/features/{name}", expect=200)
        development = {e["name"]: e["enabled"] for e in feature["environments"]}["development"]
        assert development is (i < 2), name
        assert feature["stale"] is (i == 2), name
    # Export: the selected toggles as development's client document, downloaded, with the
    # segments their strategies there refer to (and no other).
    segment = server.api("POST", "/api/admin/segments", {
        "name": unique("beta"), "constraints": [
            {"contextName": "userId", "operator": "IN", "values": ["u1"]}]}, expect=(200, 201))
    server.api("POST", "/api/admin/segments", {"name": unique("unused"), "constraints": []},
               expect=(200, 201))
    server.api("POST", f"/api/admin/projects/default/features/{names[0]}/environments/development/strategies",
               {"name": "default", "segments": [segment["id"]]}, expect=200)
    page.reload()
    page.get_by_label(f"Select {names[0]}").check()
    page.get_by_label(f"Select {names[2]}").check()
    page.get_by_label("Action").select_option("export")
    page.get_by_label("Environment (switch on/off, export)").select_option("development")
    with page.expect_download() as download:
        page.get_by_role("button", name="Apply to selected").click()
    assert download.value.suggested_filename == "flagpole-toggles-development.json"
    with open(download.value.path()) as f:
        exported = json.load(f)
    assert [(t["name"], t["enabled"]) for t in exported["features"]] == [
        (names[0], True), (names[2], False)], exported
    assert [sg["id"] for sg in exported["segments"]] == [segment["id"]], exported


def test_api_token_secret_is_shown_once(server, watched):
    page = watched.page
    sign_in(page, server)
    page.get_by_role("link", name="API tokens").click()
    expect(page.get_by_role("heading", name="API tokens", level=1)).to_be_visible()
    token_name = unique("deploy-bot")
    page.get_by_label("Token name").fill(token_name)
    page.get_by_role("button", name="Create token").click()
    secret = page.get_by_label(f"Secret of {token_name}").input_value()
    assert secret
    audit(page, f"tokens-{server.store}")
    tokens = server.api("GET", "/api/admin/api-tokens", expect=200)["tokens"]
    assert any(t.get("tokenName") == token_name or t.get("username") == token_name for t in tokens)
    page.reload()
    expect(page.get_by_label(f"Secret of {token_name}")).to_have_count(0)


def test_playground_explains_each_toggle(server, watched):
    name = unique("play")
    server.api("POST", "/api/admin/projects/default/features", {"name": name}, expect=201)
    server.api("POST", f"/api/admin/projects/default/features/{name}/environments/development/on",
               expect=200)
    page = watched.page
    sign_in(page, server)
    page.get_by_role("link", name="Playground").click()
    expect(page.get_by_role("heading", name="Playground", level=1)).to_be_visible()
    page.get_by_label("Environment").select_option("development")
    page.get_by_label("User id").fill("u1")
    page.get_by_role("button", name="Evaluate").click()
    row = page.get_by_role("row").filter(has=page.get_by_role("rowheader", name=name))
    expect(row).to_contain_text("On")
    audit(page, f"playground-{server.store}")


def test_events_page_and_filters(server, watched):
    page = watched.page
    sign_in(page, server)
    page.get_by_role("link", name="Events").click()
    expect(page.get_by_role("heading", name="Events", level=1)).to_be_visible()
    page.get_by_label("Type").select_option("feature-created")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("ol.history > li").first).to_contain_text("feature-created")
    audit(page, f"events-{server.store}")


def test_text_from_the_api_is_escaped(server, watched):
    name = unique("xss")
    attack = "<img src=x onerror=alert(1)>"
    server.api("POST", "/api/admin/projects/default/features",
               {"name": name, "description": attack}, expect=201)
    page = watched.page
    dialogs = []
    page.on("dialog", lambda d: dialogs.append(d.message))
    sign_in(page, server)
    page.goto(f"{server.url}/ui/toggles?q={name}")
    expect(page.get_by_text(attack)).to_be_visible()
    page.goto(f"{server.url}/ui/toggles/{name}")
    expect(page.get_by_text(attack).first).to_be_visible()
    assert page.locator("img[src=x]").count() == 0
    assert dialogs == []


def test_a_form_posted_from_another_origin_changes_nothing(server, watched):
    """Another port of the same host is the same *site*: the session cookie goes along, so
    only the origin check and the CSRF token stop it."""
    name = unique("csrf")
    server.api("POST", "/api/admin/projects/default/features", {"name": name}, expect=201)
    attacker = f"""<!doctype html><html lang="en"><title>x</title><body>
        <form method="post" action="{server.url}/ui/toggles/bulk">
        <input type="hidden" name="names" value="{name}">
        <input type="hidden" name="action" value="stale">
        <button type="submit">Win a prize</button></form></body></html>""".encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(attacker)

        def log_message(self, *args):
            pass

    other = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        page = watched.page
        sign_in(page, server)
        page.goto(f"http://127.0.0.1:{other.server_address[1]}/")
        with page.expect_response(lambda r: r.url.endswith("/ui/toggles/bulk")) as response:
            page.get_by_role("button", name="Win a prize").click()
        assert response.value.status == 403
        watched.allowed.append("403")
    finally:
        other.shutdown()
    assert server.api("GET", f"/api/admin/features/{name}", expect=200)["stale"] is False


def test_import_is_previewed_then_applied_and_export_downloads(server, watched):
    name = unique("imported")
    document = json.dumps({"version": 1, "features": [
        {"name": name, "description": "from an import", "type": "release", "project": "default",
         "enabled": False, "strategies": [{"name": "default"}]}]})
    page = watched.page
    sign_in(page, server)
    page.get_by_role("link", name="Import/export").click()
    expect(page.get_by_role("heading", name="Import and export", level=1)).to_be_visible()
    # The download masks addon secrets: the page says so, and how to take a full backup.
    expect(page.locator("#export-secrets")).to_contain_text("Addon secrets are masked")
    expect(page.locator("#export-secrets")).to_contain_text("/api/admin/state/export?addonSecrets=true")
    exported = page.request.get(server.url + "/ui/state/export")
    assert exported.ok and "features" in exported.json()
    page.get_by_label("Document (JSON or YAML, as exported)").fill(document)
    page.get_by_role("button", name="Preview changes").click()
    preview = page.get_by_role("status").filter(has_text="Preview: what the import would change")
    expect(preview).to_contain_text(name)
    audit(page, f"import-{server.store}")
    server.api("GET", f"/api/admin/features/{name}", expect=404)  # a dry run writes nothing
    page.get_by_role("button", name="Apply import").click()
    expect(page.get_by_role("status").first).to_contain_text("Import applied")
    assert server.api("GET", f"/api/admin/features/{name}", expect=200)["description"] == \
        "from an import"


def test_a_dead_letter_is_redelivered(server, watched):
    """A webhook refused by its receiver becomes a dead letter; once the receiver accepts,
    "Redeliver" delivers it."""
    accepting = threading.Event()
    received = []

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if accepting.is_set():
                received.append(body)
            self.send_response(200 if accepting.is_set() else 500)
            self.end_headers()

        def log_message(self, *args):
            pass

    receiver = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        page = watched.page
        sign_in(page, server)
        page.get_by_role("link", name="Addons").click()
        expect(page.get_by_role("heading", name="Addons", level=1)).to_be_visible()
        page.get_by_label("Receiver URL").fill(f"http://127.0.0.1:{receiver.server_address[1]}/hook")
        page.get_by_label("Description (optional)").fill(unique("audit"))
        page.get_by_role("button", name="Create webhook").click()
        expect(page.get_by_role("heading", name="Dead letters (0)")).to_be_visible()
        addon = page.url.rsplit("/", 1)[1]
        server.api("POST", "/api/admin/projects/default/features", {"name": unique("hooked")},
                   expect=201)
        deadline = time.monotonic() + 30
        while not server.api("GET", f"/api/admin/addons/{addon}/deliveries/dead",
                             expect=200)["deadLetters"]:
            assert time.monotonic() < deadline, "no dead letter"
            time.sleep(0.2)
        page.reload()
        expect(page.get_by_role("heading", name="Dead letters (1)")).to_be_visible()
        audit(page, f"addon-{server.store}")
        accepting.set()
        page.get_by_role("button", name="Redeliver event").first.click()
        expect(page.get_by_role("status").first).to_contain_text("Queued for redelivery")
        while not received:
            assert time.monotonic() < deadline + 30, "not redelivered"
            time.sleep(0.2)
        assert b"feature-created" in received[0]
    finally:
        receiver.shutdown()


def test_settings_create_a_project_and_switch_an_environment(server, watched):
    page = watched.page
    watched.allowed.append("422")
    sign_in(page, server)
    page.get_by_role("link", name="Settings").click()
    expect(page.get_by_role("heading", name="Settings", level=1)).to_be_visible()
    project = unique("shop")
    page.get_by_text("New projects").click()
    page.get_by_label("Project id").fill(project)
    page.get_by_role("button", name="Create", exact=True).click()
    expect(page.get_by_role("status").first).to_contain_text("Created in projects")
    assert server.api("GET", f"/api/admin/projects/{project}", expect=200)["id"] == project
    page.get_by_text("New projects").click()
    page.get_by_label("Project id").fill(project)
    page.get_by_role("button", name="Create", exact=True).click()
    expect(page.get_by_label("Project id")).to_have_value(project)
    expect(page.get_by_label("Project id")).to_have_attribute("aria-invalid", "true")
    audit(page, f"settings-{server.store}")
    page.goto(server.url + "/ui/applications")
    audit(page, f"applications-{server.store}")


@pytest.mark.parametrize("path", ["/ui/toggles", "/ui/new-toggle", "/ui/archive", "/ui/events",
                                  "/ui/playground", "/ui/tokens", "/ui/state",
                                  "/ui/addons", "/ui/applications", "/ui/settings",
                                  "/ui/settings/tag-types/simple"])
def test_every_page_at_390_px(server, browser, path):
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    errors = []
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    try:
        sign_in(page, server)
        page.goto(server.url + path)
        # Nothing wider than the screen: tables scroll inside their own region.
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 391, f"{path} is {width}px wide at 390px"
        audit(page, f"narrow{path.replace('/', '-')}-{server.store}")
        assert errors == []
    finally:
        context.close()
