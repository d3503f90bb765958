package apidocs

import (
	"html"
	"html/template"
	"regexp"
	"strings"
)

// The document's descriptions use a small part of CommonMark: paragraphs,
// "- " lists, `code`, **strong**, *emphasis* and [links](https://…).
// Everything is escaped first, so a description can never inject markup.
var (
	codeSpan = regexp.MustCompile("`([^`]+)`")
	strong   = regexp.MustCompile(`\*\*([^*]+)\*\*`)
	emphasis = regexp.MustCompile(`\*([^*\s][^*]*)\*`)
	link     = regexp.MustCompile(`\[([^\]]+)\]\((https?://[^)\s]+|#[A-Za-z0-9_-]+)\)`)
)

// markdown renders text as HTML paragraphs and lists.
func markdown(text string) template.HTML {
	var out strings.Builder
	for _, block := range strings.Split(strings.TrimSpace(text), "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		if len(lines) == 0 || lines[0] == "" {
			continue
		}
		if strings.HasPrefix(lines[0], "- ") {
			out.WriteString("<ul>")
			for _, item := range joinContinuations(lines) {
				out.WriteString("<li>" + string(inline(strings.TrimPrefix(item, "- "))) + "</li>")
			}
			out.WriteString("</ul>")
			continue
		}
		out.WriteString("<p>" + string(inline(strings.Join(lines, " "))) + "</p>")
	}
	return template.HTML(out.String())
}

// joinContinuations folds lines that continue a list item into it.
func joinContinuations(lines []string) []string {
	var items []string
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "- ") || len(items) == 0 {
			items = append(items, l)
		} else {
			items[len(items)-1] += " " + l
		}
	}
	return items
}

// inline renders one paragraph's inline markup. Code spans are cut out
// first so that nothing inside them is read as markup.
func inline(text string) template.HTML {
	var out strings.Builder
	rest := text
	for {
		loc := codeSpan.FindStringSubmatchIndex(rest)
		if loc == nil {
			out.WriteString(spans(rest))
			break
		}
		out.WriteString(spans(rest[:loc[0]]))
		out.WriteString("<code>" + html.EscapeString(rest[loc[2]:loc[3]]) + "</code>")
		rest = rest[loc[1]:]
	}
	return template.HTML(out.String())
}

func spans(text string) string {
	s := html.EscapeString(text)
	s = link.ReplaceAllString(s, `<a href="$2">$1</a>`)
	s = strong.ReplaceAllString(s, "<strong>$1</strong>")
	return emphasis.ReplaceAllString(s, "<em>$1</em>")
}
