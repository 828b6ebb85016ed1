"""Editing in the admin UI, driven by role, label and visible text against the real binary on
both stores, with the admin API checked afterwards: dependencies, a strategy edited in place,
settings records edited and deleted, a token deleted, the list's usage sparklines, the toggle
page's usage per hour, toggle variants; axe-core on each new page in both themes."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid

from playwright.sync_api import expect

from conftest import audit, sign_in


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_toggle(server, name: str, project: str = "default"):
    server.api("POST", f"/api/admin/projects/{project}/features", {"name": name}, expect=201)


def test_dependency_set_refused_then_removed(server, watched):
    parent, child, grandchild = unique("parent"), unique("child"), unique("grandchild")
    for name in (parent, child, grandchild):
        create_toggle(server, name)
    server.api("POST", f"/api/admin/projects/default/features/{parent}/environments/production/strategies",
               {"name": "flexibleRollout", "parameters": {"rollout": "100"},
                "variants": [{"name": "blue", "weight": 1000, "weightType": "variable",
                              "stickiness": "default"}]}, expect=200)
    page = watched.page
    watched.allowed.append("422")
    sign_in(page, server)
    page.goto(f"{server.url}/ui/toggles/{child}")
    deps = page.get_by_role("region", name="Dependencies")
    expect(deps).to_contain_text("No parent")
    # An unknown parent is refused with the API's message next to the field, the input kept.
    deps.get_by_text("Set a parent").click()
    deps.get_by_label("Parent toggle").fill("no-such-toggle")
    deps.get_by_role("button", name="Set parent").click()
    deps = page.get_by_role("region", name="Dependencies")
    expect(deps.get_by_text("No active feature no-such-toggle exists").first).to_be_visible()
    expect(deps.get_by_label("Parent toggle")).to_have_value("no-such-toggle")
    expect(deps.get_by_label("Parent toggle")).to_have_attribute("aria-invalid", "true")
    deps.get_by_label("Parent toggle").fill(parent)
    deps.get_by_label("On", exact=True).check()
    deps.get_by_label("Parent's variants", exact=False).fill("blue")
    deps.get_by_role("button", name="Set parent").click()
    expect(page.get_by_role("status").first).to_contain_text(f"now depends on {parent}")
    audit(page, f"toggle-dependency-{server.store}")
    page.reload()
    feature = server.api("GET", f"/api/admin/projects/default/features/{child}", expect=200)
    assert feature["dependencies"] == [{"feature": parent, "enabled": True, "variants": ["blue"]}]
    # A chain is refused: the child cannot be a parent (the API's 403 message, shown).
    page.goto(f"{server.url}/ui/toggles/{grandchild}")
    deps = page.get_by_role("region", name="Dependencies")
    deps.get_by_text("Set a parent").click()
    deps.get_by_label("Parent toggle").fill(child)
    deps.get_by_role("button", name="Set parent").click()
    expect(page.get_by_text("Transitive dependency detected").first).to_be_visible()
    # The parent's page lists its child; removing the dependency (confirmed) clears it.
    page.goto(f"{server.url}/ui/toggles/{parent}")
    expect(page.get_by_role("region", name="Dependencies")).to_contain_text(child)
    page.goto(f"{server.url}/ui/toggles/{child}")
    page.get_by_role("button", name=f"Remove dependency on {parent}").click()
    expect(page.get_by_role("status").first).to_contain_text("was removed")
    feature = server.api("GET", f"/api/admin/projects/default/features/{child}", expect=200)
    assert feature.get("dependencies", []) == []


def test_a_strategy_is_edited_in_place(server, watched):
    name = unique("edited")
    create_toggle(server, name)
    created = server.api(
        "POST", f"/api/admin/projects/default/features/{name}/environments/development/strategies",
        {"name": "flexibleRollout", "title": "Beta",
         "parameters": {"rollout": "25", "stickiness": "default", "groupId": name},
         "constraints": [{"contextName": "userId", "operator": "IN", "values": ["a", "Smith, John"]}],
         "variants": [{"name": "red", "weight": 400, "weightType": "fix", "stickiness": "userId",
                       "payload": {"type": "json", "value": "{\"x\": 1}"}},
                      {"name": "black", "weight": 600, "weightType": "variable",
                       "stickiness": "default"}]}, expect=200)
    page = watched.page
    watched.allowed.append("422")
    sign_in(page, server)
    page.goto(f"{server.url}/ui/toggles/{name}")
    page.get_by_role("link", name="Edit strategy Beta in development").click()
    expect(page.get_by_role("heading", name="Edit strategy Beta in development", level=1)).to_be_visible()
    edit_url = page.url
    # Prefilled with what the strategy holds.
    expect(page.get_by_label("Rollout (%)")).to_have_value("25")
    expect(page.get_by_label("Values 1 (one a line)")).to_have_value("a\nSmith, John")
    # The variants in the order the API keeps them; the variable one's weight left blank.
    names = [page.get_by_label(f"Variant {i} name").input_value() for i in (1, 2)]
    assert sorted(names) == ["black", "red"]
    red, black = names.index("red") + 1, names.index("black") + 1
    expect(page.get_by_label(f"Variant {red} weight (%)")).to_have_value("40")
    expect(page.get_by_label(f"Variant {red} payload type")).to_have_value("json")
    expect(page.get_by_label(f"Variant {black} weight (%)")).to_have_value("")
    # A refused save keeps what was typed. (axe runs last on a page: what it leaves in the
    # document must not be swapped by htmx.)
    page.get_by_label("Rollout (%)").fill("60")
    page.get_by_label(f"Variant {black} weight (%)").fill("10")
    page.get_by_role("button", name="Save strategy").click()
    expect(page.get_by_text("they must add up to 100%").first).to_be_visible()
    expect(page.get_by_label("Rollout (%)")).to_have_value("60")
    audit(page, f"strategy-edit-{server.store}")
    page.reload()
    page.get_by_label("Rollout (%)").fill("60")
    page.get_by_label(f"Variant {black} weight (%)").fill("")
    page.get_by_label("Context field 2").select_option("appName")
    page.get_by_label("Operator 2").select_option("STR_STARTS_WITH")
    page.get_by_label("Values 2 (one a line)").fill("web")
    page.get_by_role("button", name="Save strategy").click()
    expect(page.get_by_role("status").first).to_contain_text("Strategy saved in development")
    strategies = server.api(
        "GET", f"/api/admin/projects/default/features/{name}/environments/development/strategies",
        expect=200)
    assert len(strategies) == 1
    strategy = strategies[0]
    assert strategy["id"] == created["id"]
    assert strategy["title"] == "Beta"
    assert strategy["parameters"]["rollout"] == "60"
    assert [c["contextName"] for c in strategy["constraints"]] == ["userId", "appName"]
    assert strategy["constraints"][1]["values"] == ["web"]
    assert strategy["constraints"][0]["values"] == ["a", "Smith, John"], "a comma kept in a value"
    red = next(v for v in strategy["variants"] if v["name"] == "red")
    assert red["weight"] == 400 and red["payload"] == {"type": "json", "value": "{\"x\": 1}"}
    assert red["stickiness"] == "userId", "a variant keeps its own stickiness"
    # The edit page and the toggle page (dependencies, variants) fit a 390 px screen.
    page.set_viewport_size({"width": 390, "height": 844})
    for url in (edit_url, f"{server.url}/ui/toggles/{name}"):
        page.goto(url)
        width = page.evaluate("document.documentElement.scrollWidth")
        wide = page.evaluate("""[...document.querySelectorAll('body *')].filter(e =>
            e.getBoundingClientRect().right > 392).slice(0, 6).map(e => e.tagName + '.' +
            e.className + ' ' + Math.round(e.getBoundingClientRect().right) + ' ' + (e.parentElement.tagName) + ' ' + (e.textContent || '').slice(0, 60))""")
        assert width <= 391, f"{url} is {width}px wide at 390px: {wide}"


def test_a_token_is_deleted_without_showing_its_secret(server, watched):
    token_name = unique("old-bot")
    created = server.api("POST", "/api/admin/api-tokens",
                         {"tokenName": token_name, "type": "backend"}, expect=201)
    secret = created["secret"]
    page = watched.page
    sign_in(page, server)
    page.goto(server.url + "/ui/tokens")
    assert secret not in page.content()
    page.get_by_role("button", name=f"Delete token {token_name}").click()  # confirmed
    expect(page.get_by_role("status").first).to_contain_text(f"Token “{token_name}” deleted")
    tokens = server.api("GET", "/api/admin/api-tokens", expect=200)["tokens"]
    assert not any(t.get("tokenName") == token_name for t in tokens)
    expect(page.get_by_role("button", name=f"Delete token {token_name}")).to_have_count(0)


def open_edit_page(page, server, section: str, name: str):
    page.goto(server.url + "/ui/settings")
    page.get_by_role("region", name=section).get_by_role("link", name=f"Edit {name}").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"Edit ")


def test_a_segment_is_edited_and_its_delete_refused_while_in_use(server, watched):
    name = unique("vip")
    segment = server.api("POST", "/api/admin/segments", {
        "name": name, "constraints": [{"contextName": "userId", "operator": "IN",
                                       "values": ["u1"]}]}, expect=(200, 201))
    toggle = unique("uses-segment")
    create_toggle(server, toggle)
    strategy = server.api(
        "POST", f"/api/admin/projects/default/features/{toggle}/environments/development/strategies",
        {"name": "default", "segments": [segment["id"]]}, expect=200)
    page = watched.page
    watched.allowed.extend(["409", "422"])
    sign_in(page, server)
    open_edit_page(page, server, "Segments", name)
    expect(page.get_by_role("heading", name=f"Edit segment {name}", level=1)).to_be_visible()
    edit_url = page.url
    expect(page.get_by_label("Values 1 (one a line)")).to_have_value("u1")
    page.get_by_label("Description").fill("Our best customers")
    page.get_by_label("Values 1 (one a line)").fill("u1\nu2")
    page.get_by_label("Context field 2").select_option("appName")
    page.get_by_label("Operator 2").select_option("IN")
    page.get_by_label("Values 2 (one a line)").fill("shop")
    page.get_by_role("button", name="Save segment").click()
    expect(page.get_by_role("status").first).to_contain_text("Saved")
    stored = server.api("GET", f"/api/admin/segments/{segment['id']}", expect=200)
    assert stored["description"] == "Our best customers"
    assert [c["values"] for c in stored["constraints"]] == [["u1", "u2"], ["shop"]]
    # In use: the delete (confirmed) is refused, the API's reason shown, nothing deleted.
    page.get_by_role("button", name=f"Delete segment {name}").click()
    expect(page.get_by_role("alert")).to_contain_text("Not deleted")
    expect(page.get_by_role("alert")).to_contain_text(toggle)
    server.api("GET", f"/api/admin/segments/{segment['id']}", expect=200)
    audit(page, f"segment-edit-{server.store}")
    page.goto(edit_url)
    server.api("DELETE", f"/api/admin/projects/default/features/{toggle}/environments/development"
               f"/strategies/{strategy['id']}", expect=200)
    page.get_by_role("button", name=f"Delete segment {name}").click()
    expect(page.get_by_role("status").first).to_contain_text(f"Deleted {name}")
    server.api("GET", f"/api/admin/segments/{segment['id']}", expect=404)


def test_context_field_legal_values_project_strategy_and_tag_type_are_edited(server, watched):
    page = watched.page
    watched.allowed.append("422")
    sign_in(page, server)
    field = unique("region")
    # Created through the settings page's own form (its legal values included).
    page.goto(server.url + "/ui/settings")
    page.get_by_text("New context fields").click()
    page.get_by_label("Context field name").fill(field)
    # One value a line: a value may hold a comma.
    page.get_by_label("Legal values (one a line, optional)").fill("eu\nSmith, John")
    page.get_by_role("region", name="Context fields").get_by_role("button", name="Create").click()
    expect(page.get_by_role("status").first).to_contain_text("Created in context-fields")
    created = server.api("GET", f"/api/admin/context/{field}", expect=200)
    assert [v["value"] if isinstance(v, dict) else v for v in created["legalValues"]] == [
        "eu", "Smith, John"]
    open_edit_page(page, server, "Context fields", field)
    expect(page.get_by_label("Legal values", exact=False)).to_have_value("eu\nSmith, John")
    page.get_by_label("Legal values", exact=False).fill("eu\nus, apac\nSmith, John")
    page.get_by_role("button", name="Save context field").click()
    expect(page.get_by_role("status").first).to_contain_text("Saved")
    audit(page, f"context-field-edit-{server.store}")
    page.reload()
    stored = server.api("GET", f"/api/admin/context/{field}", expect=200)
    assert [v["value"] if isinstance(v, dict) else v for v in stored["legalValues"]] == [
        "eu", "us, apac", "Smith, John"]

    project = unique("team")
    server.api("POST", "/api/admin/projects", {"id": project, "name": "Team"}, expect=(200, 201))
    open_edit_page(page, server, "Projects", project)
    page.get_by_label("Name").fill("Team Rocket")
    page.get_by_role("button", name="Save project").click()
    expect(page.get_by_role("status").first).to_contain_text("Saved")
    assert server.api("GET", f"/api/admin/projects/{project}", expect=200)["name"] == "Team Rocket"
    page.get_by_role("button", name=f"Delete project {project}").click()
    expect(page.get_by_role("status").first).to_contain_text(f"Deleted {project}")
    server.api("GET", f"/api/admin/projects/{project}", expect=404)

    strategy = unique("by-plan")
    server.api("POST", "/api/admin/strategies", {"name": strategy, "parameters": [
        {"name": "plans", "type": "list", "description": "", "required": False}]},
        expect=(200, 201))
    open_edit_page(page, server, "Strategy definitions", strategy)
    expect(page.get_by_label("Parameter 1 name")).to_have_value("plans")
    page.get_by_label("Parameter 2 name").fill("minimum")
    page.get_by_label("Parameter 2 type").select_option("number")
    page.get_by_label("Parameter 2 required").check()
    page.get_by_role("button", name="Save strategy definition").click()
    expect(page.get_by_role("status").first).to_contain_text("Saved")
    audit(page, f"strategy-definition-edit-{server.store}")
    page.reload()
    stored = server.api("GET", f"/api/admin/strategies/{strategy}", expect=200)
    assert [(p["name"], p["type"], p["required"]) for p in stored["parameters"]] == [
        ("plans", "list", False), ("minimum", "number", True)]
    page.get_by_role("button", name=f"Delete strategy definition {strategy}").click()
    expect(page.get_by_role("status").first).to_contain_text(f"Deleted {strategy}")
    server.api("GET", f"/api/admin/strategies/{strategy}", expect=404)

    tag_type = unique("owner")
    server.api("POST", "/api/admin/tag-types", {"name": tag_type}, expect=(200, 201))
    open_edit_page(page, server, "Tag types", tag_type)
    page.get_by_label("Description").fill("Who owns the toggle")
    page.get_by_role("button", name="Save tag type").click()
    expect(page.get_by_role("status").first).to_contain_text("Saved")
    assert server.api("GET", f"/api/admin/tag-types/{tag_type}",
                      expect=200)["tagType"]["description"] == "Who owns the toggle"
    page.get_by_role("button", name=f"Delete tag type {tag_type}").click()
    expect(page.get_by_role("status").first).to_contain_text(f"Deleted {tag_type}")
    server.api("GET", f"/api/admin/tag-types/{tag_type}", expect=404)


def test_the_toggle_list_shows_last_hour_usage_per_row(server, watched):
    prefix = unique("spark")
    used, unused = f"{prefix}-used", f"{prefix}-unused"
    create_toggle(server, used)
    create_toggle(server, unused)
    body = {"appName": "shop", "instanceId": "i-1",
            "bucket": {"start": "2026-11-22T10:00:00Z", "stop": "2026-11-22T10:00:10Z",
                       "toggles": {used: {"yes": 5, "no": 2}}}}
    request = urllib.request.Request(server.url + "/api/client/metrics",
                                     data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    if server.token:
        request.add_header("Authorization", server.token)
    assert urllib.request.urlopen(request, timeout=10).status == 202
    deadline = time.monotonic() + 30
    while server.api("GET", "/api/admin/metrics/feature-toggles",
                     expect=200)["lastHour"].get(used, {}).get("yes") != 5:
        assert time.monotonic() < deadline, "the report was not counted"
        time.sleep(0.2)
    page = watched.page
    sign_in(page, server)
    # The sums are kept for 15 s and made again in the background: reload until it shows.
    shown = page.get_by_role("img", name=f"{used}: 7 evaluations in the last hour")
    deadline = time.monotonic() + 45
    while True:
        page.goto(f"{server.url}/ui/toggles?q={prefix}")
        if shown.count() == 1:
            break
        assert time.monotonic() < deadline, "the sparkline did not show the report"
        time.sleep(1)
    expect(shown).to_be_visible()
    expect(page.get_by_role("img", name=f"{unused}: 0 evaluations in the last hour")).to_be_visible()
    audit(page, f"toggles-usage-{server.store}")


def test_toggle_variants_are_shown_per_environment(server, watched):
    name = unique("variants")
    server.api("POST", "/api/admin/features", {
        "name": name, "strategies": [{"name": "default"}],
        "variants": [{"name": "blue", "weight": 1000, "weightType": "variable",
                      "stickiness": "default",
                      "payload": {"type": "string", "value": "<b>sky</b>"}}]}, expect=(200, 201))
    page = watched.page
    sign_in(page, server)
    page.goto(f"{server.url}/ui/toggles/{name}")
    default = page.get_by_role("article", name="default")
    expect(default).to_contain_text("Toggle variants")
    expect(default).to_contain_text("blue: 100.0%")
    expect(default.get_by_text("<b>sky</b>")).to_be_visible()  # escaped, shown as text


def test_ui_requests_count_against_the_admin_rate_limit(tmp_path):
    """With --rate-limit-admin 1 (a burst of 2), a signed-in person's third page at once is
    answered 429 with Retry-After, as the admin API answers; the sign-in page is not counted."""
    from conftest import Flagpole
    import http.cookiejar
    flagpole = Flagpole("embedded", ["--auth", "insecure", "--rate-limit-admin", "1"], tmp_path)
    try:
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        for _ in range(4):
            assert opener.open(flagpole.url + "/ui/sign-in", timeout=10).status == 200
        opener.open(urllib.request.Request(flagpole.url + "/ui/sign-in", data=b"name=Rita",
                                           method="POST"), timeout=10)
        statuses = []
        for _ in range(4):
            try:
                with opener.open(flagpole.url + "/ui/toggles", timeout=10) as r:
                    statuses.append(r.status)
            except urllib.error.HTTPError as e:
                statuses.append(e.code)
                if e.code == 429:
                    assert int(e.headers["Retry-After"]) >= 1
                    assert "Too many requests" in e.read().decode()
        assert 429 in statuses, statuses
        assert statuses[0] == 200, statuses
    finally:
        flagpole.stop()


def post_metrics(server, body):
    request = urllib.request.Request(server.url + "/api/client/metrics",
                                     data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    if server.token:
        request.add_header("Authorization", server.token)
    assert urllib.request.urlopen(request, timeout=10).status == 202


def test_the_toggle_page_shows_usage_per_hour(server, watched):
    name = unique("hourly")
    create_toggle(server, name)
    for app, yes, no in (("shop", 5, 2), ("billing", 1, 0)):
        post_metrics(server, {"appName": app, "instanceId": "i-1",
                              "bucket": {"start": "2026-11-22T10:00:00Z",
                                         "stop": "2026-11-22T10:00:10Z",
                                         "toggles": {name: {"yes": yes, "no": no}}}})
    deadline = time.monotonic() + 30
    while sum(m["yes"] for m in server.api(
            "GET", f"/api/admin/client-metrics/features/{name}/raw", expect=200)["data"]) != 6:
        assert time.monotonic() < deadline, "the reports were not counted"
        time.sleep(0.2)
    page = watched.page
    sign_in(page, server)
    page.goto(f"{server.url}/ui/toggles/{name}")
    expect(page.get_by_role("heading", name="Usage per hour")).to_be_visible()
    expect(page.get_by_role("img", name="Evaluations per hour in the last 24 hours, "
                            "all applications: 6 yes and 2 no in all")).to_be_visible()
    # The same numbers in a table, newest hour first.
    page.get_by_text("Evaluations per hour as a table").click()
    table = page.get_by_role("table", name="Evaluations per hour in the last 24 hours",
                             exact=False)
    expect(table.get_by_role("row")).to_have_count(25)
    counted = table.get_by_role("row").filter(has=page.get_by_role("cell", name="6", exact=True))
    expect(counted.get_by_role("cell")).to_have_text(["6", "2"])
    # One application over 48 hours, chosen with the form (the choice is in the URL). (axe
    # runs last on a page: what it leaves in the document must not be swapped by htmx.)
    page.get_by_label("Usage of application").select_option("shop")
    page.get_by_label("Usage period").select_option("48h")
    page.get_by_role("button", name="Show usage").click()
    expect(page.get_by_role("img", name="Evaluations per hour in the last 48 hours, "
                            "shop: 5 yes and 2 no in all")).to_be_visible()
    assert "usage=48h" in page.url and "app=shop" in page.url
    page.get_by_text("Evaluations per hour as a table").click()
    audit(page, f"toggle-usage-hourly-{server.store}")


def test_variants_are_edited_in_another_environment(server, watched):
    """Production's variants through its own link: saved there only, `default`'s untouched."""
    name = unique("envvariants")
    create_toggle(server, name)
    page = watched.page
    sign_in(page, server)
    page.goto(f"{server.url}/ui/toggles/{name}")
    page.get_by_role("article", name="production").get_by_role(
        "link", name="Edit variants in production").click()
    expect(page.get_by_role("heading", name=f"Toggle variants of {name} in production",
                            level=1)).to_be_visible()
    page.get_by_label("Variant 1 name").fill("teal")
    page.get_by_role("button", name="Save toggle variants").click()
    expect(page.get_by_role("status").first).to_contain_text("saved in production")
    feature = server.api("GET", f"/api/admin/projects/default/features/{name}", expect=200)
    variants = {e["name"]: [(v["name"], v["weight"]) for v in e["variants"]]
                for e in feature["environments"]}
    assert variants["production"] == [("teal", 1000)], variants
    assert variants["default"] == [], variants
    expect(page.get_by_role("article", name="production")).to_contain_text("teal")
    audit(page, f"toggle-variants-production-{server.store}")


def test_toggle_variants_are_added_edited_and_removed(server, watched):
    name = unique("tvariants")
    create_toggle(server, name)
    page = watched.page
    watched.allowed.append("422")
    sign_in(page, server)
    page.goto(f"{server.url}/ui/toggles/{name}")
    page.get_by_role("link", name="Edit toggle variants").click()
    expect(page.get_by_role("heading", name=f"Toggle variants of {name}", level=1)).to_be_visible()
    # Two variants: one fixed at 30 %, one variable taking the rest, with a payload and an
    # override whose value holds a comma.
    page.get_by_label("Variant 1 name").fill("blue")
    page.get_by_label("Variant 1 weight type").select_option("fix")
    page.get_by_label("Variant 1 fixed weight (%)").fill("130")
    page.get_by_label("Variant 1 payload type").select_option("json")
    page.get_by_label("Variant 1 payload value").fill('{"sky": true}')
    page.get_by_label("Variant 1 overrides", exact=False).fill("userId: alice\nuserId: Smith, John")
    page.get_by_role("button", name="Save toggle variants").click()
    # Refused before saving, with everything typed kept.
    expect(page.get_by_text("more than 100%").first).to_be_visible()
    expect(page.get_by_label("Variant 1 name")).to_have_value("blue")
    expect(page.get_by_label("Variant 1 payload value")).to_have_value('{"sky": true}')
    expect(page.get_by_label("Variant 1 overrides", exact=False)).to_have_value(
        "userId: alice\nuserId: Smith, John")
    audit(page, f"toggle-variants-refused-{server.store}")
    page.get_by_label("Variant 1 fixed weight (%)").fill("30")
    page.get_by_label("Variant 2 name").fill("green")
    page.get_by_role("button", name="Save toggle variants").click()
    expect(page.get_by_role("status").first).to_contain_text("Toggle variants saved")
    variants = server.api("GET", f"/api/admin/features/{name}", expect=200)["variants"]
    assert [(v["name"], v["weight"], v["weightType"]) for v in variants] == [
        ("blue", 300, "fix"), ("green", 700, "variable")]
    assert variants[0]["payload"] == {"type": "json", "value": '{"sky": true}'}
    assert variants[0]["overrides"] == [{"contextName": "userId",
                                         "values": ["alice", "Smith, John"]}]
    # Edited: filled with what was saved; the API's own refusal (a name used twice) is shown
    # on the row, then green is renamed and blue removed.
    page.get_by_role("link", name="Edit toggle variants").click()
    expect(page.get_by_label("Variant 1 fixed weight (%)")).to_have_value("30")
    expect(page.get_by_label("Variant 1 overrides", exact=False)).to_have_value(
        "userId: alice\nuserId: Smith, John")
    page.get_by_label("Variant 2 name").fill("blue")
    page.get_by_role("button", name="Save toggle variants").click()
    expect(page.get_by_text("is used twice").first).to_be_visible()
    expect(page.get_by_label("Variant 2 name")).to_have_attribute("aria-invalid", "true")
    page.get_by_label("Variant 2 name").fill("red")
    page.get_by_label("Remove variant 1").check()
    page.get_by_role("button", name="Save toggle variants").click()
    expect(page.get_by_role("status").first).to_contain_text("Toggle variants saved")
    variants = server.api("GET", f"/api/admin/features/{name}", expect=200)["variants"]
    assert [(v["name"], v["weight"]) for v in variants] == [("red", 1000)]
    page.get_by_role("link", name="Edit toggle variants").click()
    audit(page, f"toggle-variants-{server.store}")
    # The variants page and the toggle page with its hourly chart fit a 390 px screen.
    page.set_viewport_size({"width": 390, "height": 844})
    for url in (f"{server.url}/ui/toggles/{name}/variants",
                f"{server.url}/ui/toggles/{name}?usage=48h"):
        page.goto(url)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 391, f"{url} is {width}px wide at 390px"
