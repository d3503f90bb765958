package e2e

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// axeCheck runs axe-core (the npm package; .ci/run installs it and names
// it in KADI_AXE) on the page ctx shows, and fails the test on any serious
// or critical violation of WCAG 2.x A/AA. Without the package it skips the
// check, except in CI.
func axeCheck(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	path := os.Getenv("KADI_AXE")
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("KADI_AXE is not set: .ci/run installs axe-core from npm and sets it")
		}
		return
	}
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("axe-core: %v", err)
	}
	_ = value(t, ctx, chromedp.Evaluate[any](string(src)))
	out := value(t, ctx, chromedp.Evaluate[string](`axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]}})
  .then(r => JSON.stringify(r.violations.filter(v => v.impact === "serious" || v.impact === "critical")
    .map(v => v.impact + " " + v.id + ": " + v.help + " (" + v.nodes.map(n => n.target.join(" ")).slice(0, 3).join(", ") + ")")))`,
		func(p *runtime.EvaluateParams) { yes := true; p.AwaitPromise = &yes }))
	var violations []string
	if err := json.Unmarshal([]byte(out), &violations); err != nil {
		t.Fatalf("axe-core answered %q: %v", out, err)
	}
	if len(violations) > 0 {
		t.Errorf("axe-core on %s:\n  %s", page, strings.Join(violations, "\n  "))
	}
}
