package weft_test

// The decoder block of the conformance cases (bf16) and its independent check.

import (
	"math"
	"reflect"
	"testing"

	weft "github.com/weft-project/weft/bindings/go"
)

const (
	dD     = 64
	dQH    = 4
	dKVH   = 2
	dHD    = 16
	dFFN   = 128
	dSeq   = 32
	dEps   = 1e-6
	dTheta = 10000.0
)

// decWeights are the decoder's weights in binding order (1-D ones are norm weights).
var decWeights = []struct {
	name  string
	shape []int64
}{
	{"attn_norm", []int64{dD}},
	{"wq", []int64{dQH * dHD, dD}},
	{"wk", []int64{dKVH * dHD, dD}},
	{"wv", []int64{dKVH * dHD, dD}},
	{"wo", []int64{dD, dQH * dHD}},
	{"mlp_norm", []int64{dD}},
	{"w_gate", []int64{dFFN, dD}},
	{"w_up", []int64{dFFN, dD}},
	{"w_down", []int64{dD, dFFN}},
}

// decOutputs are marked on the decoder: the block's result, then q, k (after rope), v, attention for checks.
var decOutputs = []string{"out", "q", "k", "v", "attn"}

// buildDecoder: rmsnorm, q/k/v linear, rope, attention_decode over State caches, o linear + residual add,
// rmsnorm, gate/up linear, silu_mul, down linear + add (the layer of samples/decoder_block.cpp, unfused).
func buildDecoder(t *testing.T, ctx *weft.Context) *weft.Graph {
	t.Helper()
	bf := weft.DTypeBF16
	g := must(weft.NewGraph(ctx, "decoder_block"))
	ok(g.DeclareSymbol("batch", 1, 8))
	x := must(g.Input("x", bf, weft.S("batch"), weft.N(dD)))
	pos := must(g.Input("positions", weft.DTypeI32, weft.S("batch")))
	w := map[string]weft.Tensor{}
	for _, wt := range decWeights {
		dims := make([]weft.Dim, len(wt.shape))
		for i, d := range wt.shape {
			dims[i] = weft.N(d)
		}
		w[wt.name] = must(g.Weight(wt.name, bf, dims...))
	}
	cacheDims := []weft.Dim{weft.S("batch"), weft.N(dSeq), weft.N(dKVH), weft.N(dHD)}
	kc := must(g.State("k_cache", bf, cacheDims...))
	vc := must(g.State("v_cache", bf, cacheDims...))

	rope := weft.RopeOptions{HeadDim: dHD, Theta: dTheta, Style: weft.RopeHalf}
	attnOpts := weft.AttentionOptions{NumQHeads: dQH, NumKVHeads: dKVH, HeadDim: dHD}
	xn := must(g.RMSNorm(x, w["attn_norm"], dEps, "attn_in"))
	qRaw := must(g.Linear(xn, w["wq"], weft.None, weft.None, "q_raw"))
	kRaw := must(g.Linear(xn, w["wk"], weft.None, weft.None, "k_raw"))
	v := must(g.Linear(xn, w["wv"], weft.None, weft.None, "v"))
	q := must(g.RoPE(qRaw, pos, rope, "q"))
	k := must(g.RoPE(kRaw, pos, rope, "k"))
	attn := must(g.AttentionDecode(q, k, v, kc, vc, pos, attnOpts, "attn"))
	o := must(g.Linear(attn, w["wo"], weft.None, weft.None, "o"))
	h := must(g.Add(x, o, "h"))
	hn := must(g.RMSNorm(h, w["mlp_norm"], dEps, "mlp_in"))
	gate := must(g.Linear(hn, w["w_gate"], weft.None, weft.None, "gate"))
	up := must(g.Linear(hn, w["w_up"], weft.None, weft.None, "up"))
	act := must(g.SiLUMul(gate, up, "act"))
	down := must(g.Linear(act, w["w_down"], weft.None, weft.None, "down"))
	out := must(g.Add(h, down, "out"))
	for _, o := range []weft.Tensor{out, q, k, v, attn} {
		ok(g.MarkOutput(o, ""))
	}
	return g
}

type decData struct {
	batch          int
	weights        [][]weft.BF16
	x              []weft.BF16
	pos            []int32
	kCache, vCache []weft.BF16
}

func decoderData(batch int, seed uint64) *decData {
	r := newRng(seed)
	d := &decData{batch: batch}
	for _, w := range decWeights {
		n := 1
		for _, s := range w.shape {
			n *= int(s)
		}
		if len(w.shape) == 1 {
			v := r.values(n, 0.2)
			for i := range v {
				v[i] += 1 // norm weights near 1
			}
			d.weights = append(d.weights, toBF16(v))
		} else {
			d.weights = append(d.weights, r.bf16(n, 0.25))
		}
	}
	d.x = r.bf16(batch*dD, 1)
	for b := 0; b < batch; b++ {
		p := (3 + 7*b) % dSeq
		if b+1 == batch && batch > 1 {
			p = dSeq - 1 // the cache's last slot
		}
		d.pos = append(d.pos, int32(p))
	}
	n := batch * dSeq * dKVH * dHD
	d.kCache, d.vCache = r.bf16(n, 1), r.bf16(n, 1)
	return d
}

func decShape(name string, batch int) []int64 {
	b := int64(batch)
	switch name {
	case "x", "out":
		return []int64{b, dD}
	case "positions":
		return []int64{b}
	case "q", "attn":
		return []int64{b, dQH * dHD}
	case "k", "v":
		return []int64{b, dKVH * dHD}
	case "k_cache", "v_cache":
		return []int64{b, dSeq, dKVH, dHD}
	}
	for _, w := range decWeights {
		if w.name == name {
			return w.shape
		}
	}
	panic("unknown tensor " + name)
}

func count(shape []int64) int {
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	return n
}

// decResult is what a run leaves: outputs in decOutputs order and the updated caches.
type decResult struct {
	outputs        [][]weft.BF16
	kCache, vCache []weft.BF16
}

func (r *decResult) equal(o *decResult) bool { return reflect.DeepEqual(r, o) }

// runDecoderReference looks tensors up by name, so a graph read back from JSON works too.
func runDecoderReference(g *weft.Graph, d *decData) (*decResult, error) {
	res := &decResult{
		kCache: append([]weft.BF16(nil), d.kCache...),
		vCache: append([]weft.BF16(nil), d.vCache...),
	}
	var b weft.HostBindings
	bind := func(name string, f func(weft.Tensor, []int64) error) error {
		t, err := g.FindTensor(name)
		if err != nil {
			return err
		}
		return f(t, decShape(name, d.batch))
	}
	bf := func(data []weft.BF16) func(weft.Tensor, []int64) error {
		return func(t weft.Tensor, s []int64) error { return b.BF16(t, data, s...) }
	}
	steps := []error{
		bind("x", bf(d.x)),
		bind("positions", func(t weft.Tensor, s []int64) error { return b.Int32(t, d.pos, s...) }),
		bind("k_cache", bf(res.kCache)),
		bind("v_cache", bf(res.vCache)),
	}
	for i, w := range decWeights {
		steps = append(steps, bind(w.name, bf(d.weights[i])))
	}
	for _, o := range decOutputs {
		out := make([]weft.BF16, count(decShape(o, d.batch)))
		res.outputs = append(res.outputs, out)
		steps = append(steps, bind(o, bf(out)))
	}
	for _, err := range steps {
		if err != nil {
			return nil, err
		}
	}
	return res, g.RunReference(&b)
}

func ropeRow(x []float32, pos int32, heads int) []float32 {
	y := make([]float32, heads*dHD)
	half := dHD / 2
	for h := 0; h < heads; h++ {
		for i := 0; i < half; i++ {
			freq := math.Pow(dTheta, -2*float64(i)/dHD)
			s, c := math.Sincos(float64(pos) * freq)
			a, b := float64(x[h*dHD+i]), float64(x[h*dHD+i+half])
			y[h*dHD+i] = float32(a*c - b*s)
			y[h*dHD+i+half] = float32(b*c + a*s)
		}
	}
	return round(y, weft.DTypeBF16)
}

func attentionRow(q, kc, vc []float32, b, pos int) []float32 {
	scale := 1 / float32(math.Sqrt(dHD))
	out := make([]float32, dQH*dHD)
	for h := 0; h < dQH; h++ {
		kvh := h / (dQH / dKVH)
		at := func(t int) int { return ((b*dSeq+t)*dKVH + kvh) * dHD }
		scores := make([]float32, pos+1)
		m := float32(math.Inf(-1))
		for t := 0; t <= pos; t++ {
			var s float32
			for i := 0; i < dHD; i++ {
				s += q[h*dHD+i] * kc[at(t)+i]
			}
			scores[t] = s * scale
			if scores[t] > m {
				m = scores[t]
			}
		}
		var z float32
		for t := range scores {
			scores[t] = float32(math.Exp(float64(scores[t] - m)))
			z += scores[t]
		}
		for t, p := range scores {
			for i := 0; i < dHD; i++ {
				out[h*dHD+i] += p / z * vc[at(t)+i]
			}
		}
	}
	return round(out, weft.DTypeBF16)
}

func addVec(a, b []float32) []float32 {
	out := make([]float32, len(a))
	for i := range a {
		out[i] = a[i] + b[i]
	}
	return out
}

// checkDecoderSemantics checks a run against this file's arithmetic: every op given the rows the previous
// op produced (so one rounding difference does not snowball), and the cache writes bit for bit.
func checkDecoderSemantics(t *testing.T, d *decData, r *decResult) {
	t.Helper()
	bsz, bf := d.batch, weft.DTypeBF16
	w := map[string][]float32{}
	for i, wt := range decWeights {
		w[wt.name] = toF32(d.weights[i])
	}
	out, q, k, v, attn := toF32(r.outputs[0]), toF32(r.outputs[1]), toF32(r.outputs[2]), toF32(r.outputs[3]), toF32(r.outputs[4])
	const tolAbs, tolRel = 0.03, 0.02

	x := toF32(d.x)
	xn := round(rmsnorm(x, w["attn_norm"], dEps, bsz, dD), bf)
	assertClose(t, "v", v, round(linear(xn, w["wv"], nil, bsz, dD, dKVH*dHD), bf), tolAbs, tolRel)
	qRaw := round(linear(xn, w["wq"], nil, bsz, dD, dQH*dHD), bf)
	kRaw := round(linear(xn, w["wk"], nil, bsz, dD, dKVH*dHD), bf)
	qw, kw := dQH*dHD, dKVH*dHD
	for b := 0; b < bsz; b++ {
		assertClose(t, name("q row %d", b), q[b*qw:(b+1)*qw], ropeRow(qRaw[b*qw:(b+1)*qw], d.pos[b], dQH), tolAbs, tolRel)
		assertClose(t, name("k row %d", b), k[b*kw:(b+1)*kw], ropeRow(kRaw[b*kw:(b+1)*kw], d.pos[b], dKVH), tolAbs, tolRel)
	}

	// Row pos[b] of sequence b holds that row's new k / v (bitwise); every other row is untouched.
	caches := []struct {
		name                string
		before, after, rows []weft.BF16
	}{{"k_cache", d.kCache, r.kCache, r.outputs[2]}, {"v_cache", d.vCache, r.vCache, r.outputs[3]}}
	for _, c := range caches {
		for b := 0; b < bsz; b++ {
			for s := 0; s < dSeq; s++ {
				at := (b*dSeq + s) * kw
				want := c.before[at : at+kw]
				if s == int(d.pos[b]) {
					want = c.rows[b*kw : (b+1)*kw]
				}
				if !reflect.DeepEqual(c.after[at:at+kw], want) {
					t.Fatalf("%s[%d, %d]: got %v, want %v (pos %d)", c.name, b, s, c.after[at:at+kw], want, d.pos[b])
				}
			}
		}
	}

	kc, vc := toF32(r.kCache), toF32(r.vCache)
	for b := 0; b < bsz; b++ {
		assertClose(t, name("attn row %d", b), attn[b*qw:(b+1)*qw], attentionRow(q[b*qw:(b+1)*qw], kc, vc, b, int(d.pos[b])), tolAbs, tolRel)
	}

	o := round(linear(attn, w["wo"], nil, bsz, qw, dD), bf)
	h := round(addVec(x, o), bf)
	hn := round(rmsnorm(h, w["mlp_norm"], dEps, bsz, dD), bf)
	gate := round(linear(hn, w["w_gate"], nil, bsz, dD, dFFN), bf)
	up := round(linear(hn, w["w_up"], nil, bsz, dD, dFFN), bf)
	act := make([]float32, len(gate))
	for i := range gate {
		act[i] = silu(gate[i]) * up[i]
	}
	down := round(linear(round(act, bf), w["w_down"], nil, bsz, dFFN, dD), bf)
	assertClose(t, "out", out, round(addVec(h, down), bf), tolAbs, tolRel)
}
