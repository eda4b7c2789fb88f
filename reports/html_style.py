"""The report's one stylesheet, its one script (filters that only hide and show) and its CSP."""

from __future__ import annotations

import base64
import hashlib

# Scenario text is anyone's language (the seed's CHANGELOG line is Chinese): after the system's
# own face, the CJK faces Linux, macOS and Windows ship under their usual names, so a machine
# with any CJK font renders the glyphs instead of empty boxes.
SANS = ('system-ui, -apple-system, "Segoe UI", "Noto Sans", "Noto Sans CJK SC", "Noto Sans CJK JP", '
        '"WenQuanYi Micro Hei", "Droid Sans Fallback", "Source Han Sans SC", "PingFang SC", '
        '"Microsoft YaHei", sans-serif')
MONO = ('ui-monospace, "DejaVu Sans Mono", "Noto Sans Mono CJK SC", "Noto Sans Mono CJK JP", '
        '"WenQuanYi Micro Hei Mono", "WenQuanYi Micro Hei", "Droid Sans Fallback", "Source Han Sans SC", '
        'Menlo, Consolas, "Microsoft YaHei", monospace')

CSS = f"""
body{{font:14px/1.4 {SANS};margin:1.5em;color:#222;max-width:90em}}
code,pre,kbd,.events li,.diff{{font-family:{MONO}}}
h1{{margin:0 0 .3em}}h2{{margin-top:1.6em;border-bottom:1px solid #ccc}}h3{{margin:1.2em 0 .4em}}
h4{{margin:.8em 0 .3em}}
table{{border-collapse:collapse;margin:.4em 0}}
th,td{{border:1px solid #ccc;padding:2px 8px;text-align:left;vertical-align:top}}
td.n{{text-align:right;font-variant-numeric:tabular-nums}}code{{font-size:13px}}
.cell{{text-align:center;min-width:3em}}.cell a{{color:inherit;text-decoration:none;display:block}}
.v-pass{{background:#d4f4d4}}.v-fail{{background:#f8c8c8}}.v-nondeterministic{{background:#fbe7a9}}
.v-error{{background:#e0d0f0}}.v-scenario-error{{background:#cfe3f8}}
.s-unreached,.s-undeclared{{background:#f8c8c8;font-weight:bold}}
.badge{{padding:1px 6px;border-radius:3px}}.legend span{{margin-right:1em}}
#filters{{background:#f3f3f3;padding:.4em .8em;border-radius:4px}}#filters label{{margin-right:1.2em}}
details.group{{border:1px solid #ccc;border-radius:4px;margin:.5em 0;padding:.2em .8em}}
details.group>summary{{cursor:pointer;padding:.2em 0}}.count{{font-weight:bold}}
details.case{{border-left:4px solid #c00;margin:.6em 0 .6em .4em;padding:.1em .8em}}
details.case>summary{{cursor:pointer}}ul.listed{{margin:.3em 0}}
.events{{list-style:none;padding:0;margin:.2em 0;display:flex;flex-wrap:wrap;gap:3px}}
.events li{{background:#eee;border-radius:3px;padding:0 4px;font-size:12px}}
.events li.k-commit{{background:#dde8f6}}.events li.k-effect{{background:#f6e3c8}}
.events li.k-provider{{background:#e4f2e0}}.events li.k-recovery{{background:#ece0f4}}
.events li.req{{background:#fff;border:1px solid #7a7}}.events li.req.bad{{border-color:#c00}}
.events li.dlv{{background:#fff;border:1px dashed #a70}}
.events li.crash{{background:#c00;color:#fff;font-weight:bold}}
.events li.dup{{outline:2px solid #c00}}
.events li.frozen{{background:#cfe3f8;border:1px solid #369;font-weight:bold}}
.lane.intruder{{border-left:4px solid #369;padding-left:.5em;margin-left:1.5em}}
p.shared,p.cut{{color:#555;font-style:italic;margin:.2em 0}}
.lane{{border-top:1px dotted #bbb;padding:.2em 0}}.lane-head{{margin:.2em 0}}
.kill{{color:#c00;font-weight:bold}}
pre{{white-space:pre-wrap;word-break:break-all;background:#f6f6f6;padding:.4em;margin:.2em 0}}
ol.history{{padding-left:2em}}.msg .role{{font-weight:bold;font-size:12px}}
.m-user pre{{background:#eef4ff}}.m-assistant pre{{background:#f0f8ee}}.m-tool pre{{background:#fff6e8}}
pre.call{{background:#f6efe0}}.request{{border-top:1px solid #ddd;margin-top:.4em}}
pre.diff{{padding:0}}.diff>span{{display:block;padding:0 .4em}}.diff .ln{{color:#888}}
.d-add{{background:#e0f6e0}}.d-del{{background:#fbe0e0;text-decoration:line-through}}
.diff .dup{{background:#ffb0b0;font-weight:bold}}.dup-mark{{color:#b00;font-weight:bold}}
tr.left td{{color:#666;font-style:italic;border-left:none;border-right:none}}
#completeness{{padding:.3em .6em;font-weight:bold}}
.c-incomplete{{background:#f8c8c8}}.c-unknown{{background:#fbe7a9}}
"""

# No `//` comments: the page is checked for the absence of anything that looks like a URL.
# The script only hides and shows: every filter's effect is on `hidden` and on <details>' `open`
# (to reveal a case a link points into); with scripts off the whole page is there, all of it.
SCRIPT = """
(function () {
  var names = ["verdict", "invariant", "fault", "scenario"];
  var attrs = {verdict: "data-verdict", invariant: "data-invariants", fault: "data-faults",
               scenario: "data-scenario"};
  var picks = {};
  names.forEach(function (n) { picks[n] = document.getElementById("f-" + n); });
  var onlyBad = document.getElementById("only-bad");
  function has(el, attr, want) {
    return !want || (" " + (el.getAttribute(attr) || "") + " ").indexOf(" " + want + " ") >= 0;
  }
  function apply() {
    var cases = document.querySelectorAll(".case");
    for (var i = 0; i < cases.length; i++) {
      var shown = true;
      for (var k = 0; k < names.length; k++) {
        var pick = picks[names[k]];
        shown = shown && has(cases[i], attrs[names[k]], pick ? pick.value : "");
      }
      cases[i].hidden = !shown;
    }
    var groups = document.querySelectorAll(".group");
    for (var g = 0; g < groups.length; g++) {
      groups[g].hidden = groups[g].querySelectorAll(".case:not([hidden])").length === 0;
    }
    var rows = document.querySelectorAll("table.grid tbody tr");
    for (var r = 0; r < rows.length; r++) {
      rows[r].hidden = onlyBad.checked && rows[r].getAttribute("data-held") === "1";
    }
    var scenario = picks.scenario ? picks.scenario.value : "";
    var sections = document.querySelectorAll("section.scenario");
    for (var s = 0; s < sections.length; s++) {
      sections[s].hidden = !!scenario && sections[s].getAttribute("data-scenario") !== scenario;
    }
  }
  function reveal() {
    var el = location.hash ? document.getElementById(location.hash.slice(1)) : null;
    for (; el; el = el.parentElement) { if (el.tagName === "DETAILS") { el.open = true; } }
  }
  names.forEach(function (n) { if (picks[n]) { picks[n].addEventListener("change", apply); } });
  onlyBad.addEventListener("change", apply);
  window.addEventListener("hashchange", reveal);
  apply();
  reveal();
  document.body.setAttribute("data-grids", String(document.querySelectorAll("table.grid").length));
  document.body.setAttribute("data-rendered", "1");
})();
"""

# The page must not reach the network: the policy forbids every fetch, so an accidental external
# reference fails loudly (as a console error, which the browser test catches) instead of leaking.
# Only the script above may run, by its hash: markup a crafted results file slipped past the
# escaping could not run a script of its own, nor send a form or move the page's base.
SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode("ascii")
CSP = (f"default-src 'none'; style-src 'unsafe-inline'; script-src '{SCRIPT_HASH}'; "
       "base-uri 'none'; form-action 'none'")
