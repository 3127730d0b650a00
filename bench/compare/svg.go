package compare

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// A tiny SVG chart renderer for BENCHMARKS.md: grouped bars and lines, with
// a linear or logarithmic value axis. No external plotting dependency.

// Series is one named set of values, one per category (NaN = missing).
type Series struct {
	Name   string
	Color  string // "" picks from the palette by position
	Values []float64
}

func (c Chart) color(si int) string {
	if col := c.Series[si].Color; col != "" {
		return col
	}
	return palette[si%len(palette)]
}

// Chart is a chart of Series over Categories.
type Chart struct {
	Title      string
	Unit       string // value axis label
	Categories []string
	Series     []Series
	Log        bool // logarithmic value axis
	Lines      bool // lines through the points instead of grouped bars
}

const (
	svgW, svgH                     = 760, 380
	padL, padR, padT, padB float64 = 72, 16, 44, 64
)

// palette colors series that name no color.
var palette = []string{"#2b6cb0", "#c53030", "#718096", "#2f855a", "#b7791f", "#6b46c1"}

// SVG renders the chart.
func (c Chart) SVG() string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgW, svgH, svgW, svgH)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" text-anchor="middle" font-size="15" font-weight="bold">%s</text>`+"\n", svgW/2, esc(c.Title))
	lo, hi := c.valueRange()
	scale := c.scaler(lo, hi)
	plotW, plotH := float64(svgW)-padL-padR, float64(svgH)-padT-padB
	y := func(v float64) float64 { return padT + plotH*(1-scale(v)) }

	// Value axis: grid lines and labels.
	for _, t := range c.ticks(lo, hi) {
		yy := y(t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e2e8f0"/>`+"\n", padL, yy, padL+plotW, yy)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", padL-6, yy+4, esc(fmtTick(t)))
	}
	fmt.Fprintf(&b, `<text transform="translate(16,%.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", padT+plotH/2, esc(c.Unit))
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#4a5568"/>`+"\n", padL, padT+plotH, padL+plotW, padT+plotH)

	n := len(c.Categories)
	groupW := plotW / float64(max(n, 1))
	for i, cat := range c.Categories {
		cx := padL + groupW*(float64(i)+0.5)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", cx, padT+plotH+18, esc(cat))
	}
	if c.Lines {
		c.drawLines(&b, groupW, y)
	} else {
		c.drawBars(&b, groupW, y)
	}
	// Legend, under the axis.
	x := padL
	for si, s := range c.Series {
		col := c.color(si)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="12" height="12" fill="%s"/>`, x, float64(svgH)-22, col)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", x+16, float64(svgH)-12, esc(s.Name))
		x += 28 + 7*float64(len(s.Name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func (c Chart) drawBars(b *strings.Builder, groupW float64, y func(float64) float64) {
	ns := max(len(c.Series), 1)
	barW := groupW * 0.8 / float64(ns)
	base := y(c.floor())
	for i := range c.Categories {
		x0 := padL + groupW*float64(i) + groupW*0.1
		for si, s := range c.Series {
			if i >= len(s.Values) || !usable(s.Values[i], c.Log) {
				continue
			}
			v := s.Values[i]
			top := y(v)
			x := x0 + barW*float64(si)
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %s</title></rect>`+"\n",
				x, top, barW-2, math.Max(base-top, 0.5), c.color(si), esc(s.Name), esc(fmtValue(v)))
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10">%s</text>`+"\n", x+(barW-2)/2, top-3, esc(fmtValue(v)))
		}
	}
}

func (c Chart) drawLines(b *strings.Builder, groupW float64, y func(float64) float64) {
	for si, s := range c.Series {
		col := c.color(si)
		var pts []string
		for i, v := range s.Values {
			if i >= len(c.Categories) || !usable(v, c.Log) {
				continue
			}
			x := padL + groupW*(float64(i)+0.5)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y(v)))
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s: %s</title></circle>`+"\n", x, y(v), col, esc(s.Name), esc(fmtValue(v)))
			// Stagger labels by series so close points stay readable.
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="10" fill="%s">%s</text>`+"\n", x+6, y(v)-5+12*float64(si%3)-12, col, esc(fmtValue(v)))
		}
		if len(pts) > 1 {
			fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), col)
		}
	}
}

func usable(v float64, log bool) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (!log || v > 0)
}

// valueRange is the span the value axis must show.
func (c Chart) valueRange() (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range c.Series {
		for _, v := range s.Values {
			if usable(v, c.Log) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) { // no data
		lo, hi = 1, 10
	}
	if c.Log {
		return math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi*1.0001)))
	}
	step := niceStep(hi / 5)
	return 0, math.Max(step, math.Ceil(hi*1.08/step)*step)
}

func (c Chart) floor() float64 {
	lo, _ := c.valueRange()
	return lo
}

// scaler maps a value to 0..1 of the axis.
func (c Chart) scaler(lo, hi float64) func(float64) float64 {
	if c.Log {
		a, z := math.Log10(lo), math.Log10(hi)
		return func(v float64) float64 { return (math.Log10(v) - a) / (z - a) }
	}
	return func(v float64) float64 { return (v - lo) / (hi - lo) }
}

func (c Chart) ticks(lo, hi float64) []float64 {
	var out []float64
	if c.Log {
		for v := lo; v <= hi*1.0001; v *= 10 {
			out = append(out, v)
		}
		return out
	}
	step := niceStep(hi / 5)
	for v := lo; v <= hi+step/1000; v += step {
		out = append(out, v)
	}
	return out
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

func fmtTick(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 1e6:
		return trimZeros(fmt.Sprintf("%.1fM", v/1e6))
	case math.Abs(v) >= 1e4:
		return trimZeros(fmt.Sprintf("%.1fk", v/1e3))
	case math.Abs(v) >= 1:
		return trimZeros(fmt.Sprintf("%.1f", v))
	}
	return trimZeros(fmt.Sprintf("%.3f", v))
}

func trimZeros(s string) string {
	unit := ""
	if strings.HasSuffix(s, "k") || strings.HasSuffix(s, "M") {
		s, unit = s[:len(s)-1], s[len(s)-1:]
	}
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s + unit
}

// fmtValue prints a value with three significant digits.
func fmtValue(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.3gk", v/1e3)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

func esc(s string) string { return html.EscapeString(s) }
