package weft_test

// Graph builders and independent float32 arithmetic shared by the conformance tests.

import (
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"testing"

	weft "github.com/weft-project/weft/bindings/go"
)

// rng is xorshift64*: deterministic, no modules needed.
type rng uint64

func newRng(seed uint64) *rng { r := rng(seed*0x9e3779b97f4a7c15 | 1); return &r }

func (r *rng) next() uint64 {
	x := uint64(*r)
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	*r = rng(x)
	return x * 0x2545f4914f6cdd1d
}

// values gives n values uniform in [-scale, scale), none of them zero (a missing write cannot hide).
func (r *rng) values(n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		for v[i] == 0 {
			v[i] = scale * (float32(r.next()>>40)/float32(1<<24)*2 - 1)
		}
	}
	return v
}

func (r *rng) bf16(n int, scale float32) []weft.BF16 { return toBF16(r.values(n, scale)) }

func toBF16(v []float32) []weft.BF16 {
	out := make([]weft.BF16, len(v))
	for i, x := range v {
		out[i] = weft.BF16FromFloat32(x)
	}
	return out
}

func toF32(v []weft.BF16) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = x.Float32()
	}
	return out
}

// round does what the reference does to a tensor of dtype: rounds each value to it.
func round(v []float32, dtype weft.DType) []float32 {
	if dtype == weft.DTypeBF16 {
		return toF32(toBF16(v))
	}
	return v
}

// linear is x [rows, k] · w [n, k]ᵀ (+ bias [n]) in float32.
func linear(x, w, bias []float32, rows, k, n int) []float32 {
	y := make([]float32, rows*n)
	for r := 0; r < rows; r++ {
		for j := 0; j < n; j++ {
			var acc float32
			for i := 0; i < k; i++ {
				acc += x[r*k+i] * w[j*k+i]
			}
			if bias != nil {
				acc += bias[j]
			}
			y[r*n+j] = acc
		}
	}
	return y
}

func silu(x float32) float32 { return x / (1 + float32(math.Exp(float64(-x)))) }

func rmsnorm(x, w []float32, eps float32, rows, d int) []float32 {
	y := make([]float32, rows*d)
	for r := 0; r < rows; r++ {
		var ms float32
		for i := 0; i < d; i++ {
			ms += x[r*d+i] * x[r*d+i]
		}
		inv := 1 / float32(math.Sqrt(float64(ms/float32(d)+eps)))
		for i := 0; i < d; i++ {
			y[r*d+i] = x[r*d+i] * inv * w[i]
		}
	}
	return y
}

// assertClose fails unless |got - want| <= abs + rel*|want| everywhere.
func assertClose(t *testing.T, what string, got, want []float32, abs, rel float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if math.IsNaN(float64(g)) || math.IsInf(float64(g), 0) {
			t.Fatalf("%s[%d] = %v is not finite", what, i, g)
		}
		if float32(math.Abs(float64(g-w))) > abs+rel*float32(math.Abs(float64(w))) {
			t.Fatalf("%s[%d]: got %v, want %v", what, i, g, w)
		}
	}
}

// failure is what must and ok panic with; catch, deferred at the top of each test, turns it into t.Fatal.
// (Go cannot pass a call's two results and a *testing.T to one function.)
type failure struct {
	err   error
	where string
}

func fail(err error) {
	_, file, line, _ := runtime.Caller(2)
	panic(failure{err, fmt.Sprintf("%s:%d", filepath.Base(file), line)})
}

func must[T any](v T, err error) T {
	if err != nil {
		fail(err)
	}
	return v
}

func ok(err error) {
	if err != nil {
		fail(err)
	}
}

func catch(t *testing.T) {
	if r := recover(); r != nil {
		f, isFailure := r.(failure)
		if !isFailure {
			panic(r)
		}
		t.Fatalf("%s: %v", f.where, f.err)
	}
}

// ---- the MLP: x[batch, K] -> linear -> silu -> linear ----

const (
	mlpK      = 64
	mlpHidden = 96
	mlpN      = 32
)

type mlp struct {
	g                    *weft.Graph
	x, w1, b1, w2, b2, y weft.Tensor
}

func buildMLP(t *testing.T, ctx *weft.Context, dtype weft.DType) *mlp {
	t.Helper()
	g := must(weft.NewGraph(ctx, "mlp"))
	ok(g.DeclareSymbol("batch", 1, 8))
	m := &mlp{g: g}
	m.x = must(g.Input("x", dtype, weft.S("batch"), weft.N(mlpK)))
	m.w1 = must(g.Weight("w1", dtype, weft.N(mlpHidden), weft.N(mlpK)))
	m.b1 = must(g.Weight("b1", dtype, weft.N(mlpHidden)))
	m.w2 = must(g.Weight("w2", dtype, weft.N(mlpN), weft.N(mlpHidden)))
	m.b2 = must(g.Weight("b2", dtype, weft.N(mlpN)))
	h := must(g.Linear(m.x, m.w1, m.b1, weft.None, "h"))
	a := must(g.SiLU(h, "a"))
	m.y = must(g.Linear(a, m.w2, m.b2, weft.None, "y"))
	ok(g.MarkOutput(m.y, ""))
	return m
}

// mlpData gives random operands already rounded to dtype: x, w1, b1, w2, b2.
func mlpData(batch int, dtype weft.DType, seed uint64) [5][]float32 {
	r := newRng(seed)
	sizes := [5]struct {
		n     int
		scale float32
	}{{batch * mlpK, 1}, {mlpHidden * mlpK, 0.125}, {mlpHidden, 0.1}, {mlpN * mlpHidden, 0.1}, {mlpN, 0.1}}
	var d [5][]float32
	for i, s := range sizes {
		d[i] = round(r.values(s.n, s.scale), dtype)
	}
	return d
}

func mlpShapes(batch int) [6][]int64 {
	return [6][]int64{{int64(batch), mlpK}, {mlpHidden, mlpK}, {mlpHidden}, {mlpN, mlpHidden}, {mlpN}, {int64(batch), mlpN}}
}

// mlpExpected computes the MLP here, rounding each op's result to dtype as weft's reference does.
func mlpExpected(d [5][]float32, batch int, dtype weft.DType) []float32 {
	h := round(linear(d[0], d[1], d[2], batch, mlpK, mlpHidden), dtype)
	a := make([]float32, len(h))
	for i, v := range h {
		a[i] = silu(v)
	}
	return round(linear(round(a, dtype), d[3], d[4], batch, mlpHidden, mlpN), dtype)
}

// runMLPF32 binds f32 data by tensor (so a graph read back from JSON works too) and runs the reference.
func runMLPF32(g *weft.Graph, d [5][]float32, batch int) ([]float32, error) {
	y := make([]float32, batch*mlpN)
	var b weft.HostBindings
	shapes := mlpShapes(batch)
	for i, name := range []string{"x", "w1", "b1", "w2", "b2"} {
		tensor, err := g.FindTensor(name)
		if err != nil {
			return nil, err
		}
		if err := b.Float32(tensor, d[i], shapes[i]...); err != nil {
			return nil, err
		}
	}
	outs, err := g.Outputs()
	if err != nil {
		return nil, err
	}
	if err := b.Float32(outs[0], y, shapes[5]...); err != nil {
		return nil, err
	}
	return y, g.RunReference(&b)
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func name(format string, args ...any) string { return fmt.Sprintf(format, args...) }
