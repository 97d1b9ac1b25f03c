package viewer

import (
	"cmp"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gdamore/tcell/v2"

	"github.com/memtrace/memtrace/analysis"
)

// costViewMode is what the list pane shows instead of records: nothing
// (the records), the call tree or the icicle.
type costViewMode int

const (
	viewNone costViewMode = iota
	viewTree
	viewFlame
	viewAllocs // the allocations chart (charts.go)
	viewTemp   // the temporary allocations chart
)

type treeKey struct {
	version  uint64
	cost     Cost
	bottomUp bool
	proc     int32
}

// costView is the state of the tree and icicle views.
type costView struct {
	mode     costViewMode
	cost     Cost
	bottomUp bool

	costs    *analysis.Costs
	costsVer uint64
	costsAt  time.Time
	root     *TreeNode
	key      treeKey

	open    map[string]bool // tree: expanded nodes, by pathKey
	opened  bool            // the first levels were opened
	rows    []TreeRow
	cur     int
	top     int
	curPath []string // the cursor's node, kept across rebuilds

	zoom []string // icicle: the zoomed node's path
	sel  []string // icicle: the selected frame's path
}

// costsRecount is how often a growing log's costs are computed again: they
// walk every event.
const costsRecount = time.Second

// costTree is the tree of the view's cost, rebuilt when the model, the
// cost, the direction or the process filter changed; the caller holds
// a.Mu.
func (a *App) costTree() *TreeNode {
	v := &a.cv
	m := a.M
	if v.costs == nil || v.costsVer != m.Version && (a.ended || time.Since(v.costsAt) >= costsRecount) {
		v.costs, v.costsVer, v.costsAt = m.ReportCosts(), m.Version, time.Now()
	}
	k := treeKey{v.costsVer, v.cost, v.bottomUp, a.q.Proc}
	if v.root == nil || v.key != k {
		var drop func(uint32) bool
		if v.cost == CostLeaked && !a.opt.NoBuiltinSuppressions {
			drop = a.stackSuppressed
		}
		v.root, v.key = BuildTree(m, v.costs, a.q.Proc, v.cost, v.bottomUp, drop, a.frameName, a.frameCalls), k
		if !v.opened {
			v.open, v.opened = map[string]bool{}, true
			openToBranch(v.root, "", v.open)
		}
	}
	return v.root
}

// openToBranch opens a fresh tree as the report's trees open: every
// top-level node, and below it, down to the first branch, where the cost
// divides: a node is opened while its parent leads to it alone.
func openToBranch(n *TreeNode, key string, open map[string]bool) {
	callees := 0
	for _, k := range n.Kids {
		if !k.Self {
			callees++
		}
	}
	if n.Parent != nil && callees != 1 {
		return
	}
	for _, k := range n.Kids {
		if len(k.Kids) == 0 {
			continue
		}
		kk := key + k.Name + "\x00"
		open[kk] = true
		openToBranch(k, kk, open)
	}
}

// openLevels opens levels levels below n (-1: all).
func openLevels(n *TreeNode, key string, levels int, open map[string]bool) {
	if levels == 0 {
		return
	}
	for _, k := range n.Kids {
		kk := key + k.Name + "\x00"
		open[kk] = true
		openLevels(k, kk, levels-1, open)
	}
}

// stackSuppressed reports whether the built-in suppressions hide stack st.
func (a *App) stackSuppressed(st uint32) bool {
	c := &a.supp
	if c.sups == nil {
		c.sups = analysis.BuiltinSuppressions()
	}
	if c.byStack == nil {
		c.byStack = map[uint32]bool{}
	}
	sup, ok := c.byStack[st]
	if !ok {
		sup = a.M.StackSuppressed(c.sups, st)
		c.byStack[st] = sup
	}
	return sup
}

// setView switches the list pane to mode (again: back to the records).
func (a *App) setView(mode costViewMode) {
	if a.cv.mode == mode {
		a.cv.mode = viewNone
		return
	}
	a.cv.mode = mode
	a.hist, a.fdView = false, false
}

// treeRowsNow is the tree's visible rows, the cursor put back on its node.
func (a *App) treeRowsNow() []TreeRow {
	v := &a.cv
	root := a.costTree()
	v.rows = TreeRows(root, v.open)
	if v.curPath != nil {
		want := strings.Join(v.curPath, "\x00")
		if v.cur >= len(v.rows) || strings.Join(v.rows[v.cur].Node.Path(), "\x00") != want {
			for k, r := range v.rows {
				if strings.Join(r.Node.Path(), "\x00") == want {
					v.cur = k
					break
				}
			}
		}
	}
	v.cur = max(min(v.cur, len(v.rows)-1), 0)
	return v.rows
}

func (a *App) treeMove(d int) {
	v := &a.cv
	rows := a.treeRowsNow()
	v.cur = max(min(v.cur+d, len(rows)-1), 0)
	if v.cur < len(rows) {
		v.curPath = rows[v.cur].Node.Path()
	}
}

// treeToggle opens or closes the node under the cursor (or, with all,
// opens its whole subtree).
func (a *App) treeToggle(open, all bool) {
	v := &a.cv
	rows := a.treeRowsNow()
	if v.cur >= len(rows) {
		return
	}
	n := rows[v.cur].Node
	key := pathKey(n)
	switch {
	case all:
		v.open[key] = true
		openLevels(n, key, -1, v.open)
	case open:
		v.open[key] = true
	default:
		delete(v.open, key)
	}
	v.curPath = n.Path()
}

// flameNodes is the icicle's zoomed node and the selected one.
func (a *App) flameNodes() (zoom, sel *TreeNode) {
	v := &a.cv
	root := a.costTree()
	zoom = root.Find(v.zoom)
	v.zoom = zoom.Path()
	sel = root.Find(v.sel)
	if !isUnder(sel, zoom) {
		sel = zoom
	}
	v.sel = sel.Path()
	return zoom, sel
}

func isUnder(n, anc *TreeNode) bool {
	for ; n != nil; n = n.Parent {
		if n == anc {
			return true
		}
	}
	return false
}

// flameMove moves the icicle's selection: dy rows down (to the widest
// callee) or up (to the caller), dx boxes along its row.
func (a *App) flameMove(dx, dy int) {
	v := &a.cv
	zoom, sel := a.flameNodes()
	switch {
	case dy > 0 && slices.ContainsFunc(sel.Kids, func(k *TreeNode) bool { return !k.Self }):
		sel = sel.Kids[slices.IndexFunc(sel.Kids, func(k *TreeNode) bool { return !k.Self })]
	case dy < 0 && sel != zoom:
		sel = sel.Parent
	case dx != 0:
		boxes := FlameLayout(zoom, max(a.flameW, 1), 1<<20)
		var row []FlameBox
		d := -1
		for _, b := range boxes {
			if b.Node == sel {
				d = b.Depth
			}
		}
		for _, b := range boxes {
			if b.Depth == d {
				row = append(row, b)
			}
		}
		for k, b := range row {
			if b.Node == sel && k+dx >= 0 && k+dx < len(row) {
				sel = row[k+dx].Node
				break
			}
		}
	}
	v.sel = sel.Path()
}

// flameZoom zooms in to the selected frame (in true) or out by one level;
// out of the root it leaves the view.
func (a *App) flameZoom(in bool, leave bool) {
	v := &a.cv
	zoom, sel := a.flameNodes()
	switch {
	case in:
		v.zoom = sel.Path()
	case zoom.Parent != nil:
		v.zoom = zoom.Parent.Path()
	case leave:
		v.mode = viewNone
	}
}

// ViewKeys are the keys of the tree and icicle views, looked up before the
// key table while one of them is shown.
var ViewKeys []binding

func init() {
	tree := func(f func(a *App)) func(a *App) {
		return func(a *App) {
			if a.cv.mode == viewTree {
				f(a)
			}
		}
	}
	flame := func(f func(a *App)) func(a *App) {
		return func(a *App) {
			if a.cv.mode == viewFlame {
				f(a)
			}
		}
	}
	ViewKeys = []binding{
		{[]key{{tcell.KeyUp, 0}, rk('k')}, "↑ ↓ / k j", "tree: move; icicle: to the caller / the widest callee", func(a *App) {
			tree(func(a *App) { a.treeMove(-1) })(a)
			flame(func(a *App) { a.flameMove(0, -1) })(a)
		}},
		{[]key{{tcell.KeyDown, 0}, rk('j')}, "", "", func(a *App) {
			tree(func(a *App) { a.treeMove(1) })(a)
			flame(func(a *App) { a.flameMove(0, 1) })(a)
		}},
		{[]key{{tcell.KeyPgUp, 0}, {tcell.KeyCtrlB, 0}}, "PgUp PgDn / Ctrl-b Ctrl-f", "tree: page", tree(func(a *App) { a.treeMove(-a.page()) })},
		{[]key{{tcell.KeyPgDn, 0}, {tcell.KeyCtrlF, 0}}, "", "", tree(func(a *App) { a.treeMove(a.page()) })},
		{[]key{{tcell.KeyHome, 0}, rk('g')}, "Home End / g G", "tree: top / bottom; icicle: select the zoomed frame", func(a *App) {
			tree(func(a *App) { a.treeMove(-len(a.cv.rows)) })(a)
			flame(func(a *App) { a.cv.sel = a.cv.zoom })(a)
		}},
		{[]key{{tcell.KeyEnd, 0}, rk('G')}, "", "", tree(func(a *App) { a.treeMove(len(a.cv.rows)) })},
		{[]key{{tcell.KeyEnter, 0}, rk(' ')}, "Enter / Space", "tree: expand / collapse the node; icicle: zoom to the frame", func(a *App) {
			tree(func(a *App) {
				rows := a.treeRowsNow()
				if a.cv.cur < len(rows) {
					a.treeToggle(!rows[a.cv.cur].Open, false)
				}
			})(a)
			flame(func(a *App) { a.flameZoom(true, false) })(a)
		}},
		{[]key{{tcell.KeyRight, 0}, rk('l')}, "→ ← / l h", "tree: expand, or to the first callee / collapse, or to the caller; icicle: next / previous frame of the row", func(a *App) {
			tree(func(a *App) {
				rows := a.treeRowsNow()
				switch {
				case a.cv.cur >= len(rows):
				case !rows[a.cv.cur].Open && len(rows[a.cv.cur].Node.Kids) > 0:
					a.treeToggle(true, false)
				case rows[a.cv.cur].Open:
					a.treeMove(1)
				}
			})(a)
			flame(func(a *App) { a.flameMove(1, 0) })(a)
		}},
		{[]key{{tcell.KeyLeft, 0}, rk('h')}, "", "", func(a *App) {
			tree(func(a *App) {
				rows := a.treeRowsNow()
				switch {
				case a.cv.cur >= len(rows):
				case rows[a.cv.cur].Open:
					a.treeToggle(false, false)
				case rows[a.cv.cur].Node.Parent.Parent != nil:
					p := rows[a.cv.cur].Node.Parent
					a.cv.curPath = p.Path()
					a.cv.cur = 0
					a.treeRowsNow()
				}
			})(a)
			flame(func(a *App) { a.flameMove(-1, 0) })(a)
		}},
		{[]key{rk('+'), rk('*')}, "+ / *", "tree: expand the node's whole subtree", tree(func(a *App) { a.treeToggle(true, true) })},
		{[]key{rk('-')}, "-", "tree: collapse every node", tree(func(a *App) {
			a.cv.open = map[string]bool{}
			rows := a.treeRowsNow()
			if a.cv.cur < len(rows) {
				p := rows[a.cv.cur].Node.Path()
				a.cv.curPath = p[:1]
			}
		})},
		{[]key{{tcell.KeyBackspace, 0}, {tcell.KeyBackspace2, 0}}, "Backspace", "icicle: zoom out one level", flame(func(a *App) { a.flameZoom(false, false) })},
		{[]key{{tcell.KeyEscape, 0}}, "Esc", "icicle: zoom out, out of the whole: back to the records; tree: back to the records", func(a *App) {
			if a.cv.mode == viewTree {
				a.cv.mode = viewNone
				return
			}
			a.flameZoom(false, true)
		}},
	}
}

// viewKey handles ev when the tree or icicle view has it; false: the key
// table's keys apply.
func (a *App) viewKey(ev *tcell.EventKey) bool {
	switch a.cv.mode {
	case viewNone:
		return false
	case viewAllocs, viewTemp:
		// The charts have no keys of their own but Esc, which would quit.
		if ev.Key() == tcell.KeyEscape {
			a.cv.mode = viewNone
			return true
		}
		return false
	}
	k, r := ev.Key(), ev.Rune()
	for i := range ViewKeys {
		for _, kk := range ViewKeys[i].keys {
			if kk.k == k && (k != tcell.KeyRune || kk.r == r) {
				ViewKeys[i].do(a)
				return true
			}
		}
	}
	return false
}

// nodeSource is where a node's first frame is in the source, "" when
// unknown.
func (a *App) nodeSource(n *TreeNode) string {
	if !n.HasFr {
		return ""
	}
	if n.At != "" {
		return n.At
	}
	s, ok := a.frameSource(n.Frame)
	if !ok {
		return ""
	}
	return s
}

func (a *App) pct(v, total uint64) string {
	if total == 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(v)*100/float64(total), 'f', 1, 64) + "%"
}

func (a *App) costViewTitle(what string, root *TreeNode) string {
	dir := "top-down"
	if a.cv.bottomUp {
		dir = "bottom-up"
	}
	return what + " " + dir + ", " + a.cv.cost.String() + ": " + a.cv.cost.format(root.Value) + " in all"
}

func (a *App) drawTree(x0, y0, x1, y1 int) {
	v := &a.cv
	rows := a.treeRowsNow()
	root := a.costTree()
	a.put(x0, y0, x1, pad(a.costViewTitle("Call tree", root)+"   (c: close  u: direction  C: cost  ?: keys)", x1-x0), a.headStyle(PaneList))
	n := y1 - y0 - 2
	if n < 1 {
		return
	}
	v.top = scrollTo(v.cur, v.top, n, len(rows))
	if len(rows) == 0 {
		a.put(x0+1, y0+2, x1, "no "+v.cost.String()+" cost in this log (C: another cost)", stDim)
		return
	}
	for r := 0; r < n && v.top+r < len(rows); r++ {
		row := rows[v.top+r]
		mark := "  "
		switch {
		case row.Open:
			mark = "▾ "
		case len(row.Node.Kids) > 0:
			mark = "▸ "
		}
		line := lpad(v.cost.format(row.Node.Value), 10) + " " + lpad(a.pct(row.Node.Value, root.Value), 6) + "  " + strings.Repeat("  ", row.Depth) + mark + row.Node.Name
		st := stDefault
		if v.top+r == v.cur {
			st = st.Reverse(true)
		}
		a.put(x0, y0+1+r, x1, pad(line, x1-x0), st)
	}
	if v.cur < len(rows) {
		nd := rows[v.cur].Node
		info := nd.Name
		if s := a.nodeSource(nd); s != "" {
			info += "  at " + s
		}
		a.put(x0, y1-1, x1, pad(" ▸ "+info, x1-x0), stDim)
	}
}

// flameColors are the icicle's box colours, picked by function name so
// that a function keeps its colour.
var flameColors = []tcell.Color{tcell.ColorDarkOrange, tcell.ColorOrange, tcell.ColorGold, tcell.ColorIndianRed, tcell.ColorSalmon, tcell.ColorCoral, tcell.ColorSandyBrown, tcell.ColorTomato}

func flameColor(name string) tcell.Color {
	h := fnv.New32a()
	h.Write([]byte(name))
	return flameColors[h.Sum32()%uint32(len(flameColors))]
}

func (a *App) drawFlame(x0, y0, x1, y1 int) {
	zoom, sel := a.flameNodes()
	root := a.costTree()
	crumbs := "all"
	for _, p := range a.cv.zoom {
		crumbs += " ▸ " + p
	}
	a.put(x0, y0, x1, pad(a.costViewTitle("Icicle", root)+"   zoom: "+crumbs, x1-x0), a.headStyle(PaneList))
	w, rows := x1-x0, y1-y0-2
	a.flameW = w
	if rows < 1 {
		return
	}
	boxes := FlameLayout(zoom, w, rows)
	if len(boxes) == 0 {
		a.put(x0+1, y0+2, x1, "no "+a.cv.cost.String()+" cost in this log (C: another cost)", stDim)
		return
	}
	for _, b := range boxes {
		st := stDefault.Background(flameColor(cmp.Or(b.Node.Func, b.Node.Name))).Foreground(tcell.ColorBlack)
		if b.Node == sel {
			st = stDefault.Background(tcell.ColorWhite).Foreground(tcell.ColorBlack).Bold(true)
		}
		label := b.Node.Name
		if b.Node.Parent == nil {
			label = "all"
		}
		text := []rune(label)
		y := y0 + 1 + b.Depth
		for c := 0; c < b.W; c++ {
			r := ' '
			switch {
			case c == b.W-1 && b.W > 1:
				r = '▕' // the box's right edge: neighbours stay apart
			case c < len(text) && (c < b.W-2 || len(text) <= b.W-1):
				r = text[c]
			case c == b.W-2 && len(text) > b.W-1:
				r = '…'
			}
			a.scr.SetContent(x0+b.X+c, y, r, nil, st)
		}
	}
	info := sel.Name
	if sel.Parent == nil {
		info = "all"
	}
	info += "  " + a.cv.cost.format(sel.Value) + " (" + a.pct(sel.Value, root.Value) + ")"
	if s := a.nodeSource(sel); s != "" {
		info += "  at " + s
	}
	a.put(x0, y1-1, x1, pad(" ▸ "+info+"   (Enter: zoom  Bksp/Esc: out  C: cost)", x1-x0), stDim)
}
