package weft_test

// The conformance cases every weft binding runs: an MLP and a decoder block on the CPU reference, checked
// against arithmetic done here; JSON round trips; compiling without a GPU.

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"testing"

	weft "github.com/weft-project/weft/bindings/go"
)

func newContext(t *testing.T) *weft.Context {
	ctx := must(weft.NewContext())
	t.Cleanup(func() { ctx.Close() })
	return ctx
}

func TestVersionAndOps(t *testing.T) {
	defer catch(t)
	if weft.Version() != weft.HeaderVersion {
		t.Fatalf("library %d, header %d", weft.Version(), weft.HeaderVersion)
	}
	if weft.VersionString() != "0.1.0" {
		t.Fatalf("version %q", weft.VersionString())
	}
	ops := strings.Join(weft.OpNames(), " ")
	for _, op := range []string{"linear", "silu", "rmsnorm", "rope", "attention_decode", "silu_mul", "add"} {
		if !strings.Contains(" "+ops+" ", " "+op+" ") {
			t.Errorf("op table lacks %s: %s", op, ops)
		}
	}
	if weft.DTypeBF16.String() != "bf16" || weft.DTypeI64.String() != "i64" || weft.ErrCUDA.String() != "WEFT_ERROR_CUDA" {
		t.Errorf("names: %v %v %v", weft.DTypeBF16, weft.DTypeI64, weft.ErrCUDA)
	}
}

func TestHalfConversions(t *testing.T) {
	defer catch(t)
	if weft.BF16FromFloat32(1) != 0x3f80 || weft.BF16FromFloat32(1+1.0/256).Float32() != 1 {
		t.Error("bf16 rounding")
	}
	if weft.BF16FromFloat32(1+3.0/256).Float32() != 1+4.0/256 {
		t.Error("bf16 rounds up past the tie")
	}
	for _, v := range []float32{0, 1, -1.5, 65504, 6.1035156e-5, 5.9604645e-8} {
		if got := weft.F16FromFloat32(v).Float32(); got != v {
			t.Errorf("f16 %v -> %v", v, got)
		}
	}
	if weft.F16FromFloat32(1) != 0x3c00 || weft.F16FromFloat32(2.9e-8) != 0 {
		t.Error("f16 bits")
	}
}

func TestMLPFloat32MatchesIndependentMath(t *testing.T) {
	defer catch(t)
	m := buildMLP(t, newContext(t), weft.DTypeF32)
	defer m.g.Close()
	for _, batch := range []int{1, 3, 8} {
		d := mlpData(batch, weft.DTypeF32, uint64(11+batch))
		y := must(runMLPF32(m.g, d, batch))
		assertClose(t, name("y (batch %d)", batch), y, mlpExpected(d, batch, weft.DTypeF32), 1e-5, 1e-4)
	}
}

func TestMLPBF16MatchesIndependentMath(t *testing.T) {
	defer catch(t)
	m := buildMLP(t, newContext(t), weft.DTypeBF16)
	defer m.g.Close()
	batch := 5
	d := mlpData(batch, weft.DTypeBF16, 7)
	y := make([]weft.BF16, batch*mlpN)
	var b weft.HostBindings
	shapes := mlpShapes(batch)
	for i, tensor := range []weft.Tensor{m.x, m.w1, m.b1, m.w2, m.b2} {
		ok(b.BF16(tensor, toBF16(d[i]), shapes[i]...))
	}
	ok(b.BF16(m.y, y, shapes[5]...))
	ok(m.g.RunReference(&b))
	// Two bf16 ulps of slack: one rounding of an intermediate may go the other way.
	assertClose(t, "y", toF32(y), mlpExpected(d, batch, weft.DTypeBF16), 1e-3, 2.0/128)
}

func TestMLPIntrospectionAndJSONRoundTrip(t *testing.T) {
	defer catch(t)
	ctx := newContext(t)
	m := buildMLP(t, ctx, weft.DTypeF32)
	g := m.g
	ok(g.Validate())
	if outs := must(g.Outputs()); !reflect.DeepEqual(outs, []weft.Tensor{m.y}) {
		t.Fatalf("outputs %v", outs)
	}
	info := must(g.TensorInfo(m.x))
	want := weft.TensorInfo{Name: "x", Kind: weft.Input, DType: weft.DTypeF32, Dims: []weft.Dim{weft.S("batch"), weft.N(mlpK)}}
	if !reflect.DeepEqual(info, want) {
		t.Fatalf("info %+v, want %+v", info, want)
	}
	if y := must(g.TensorInfo(m.y)); y.Kind != weft.Intermediate || !y.IsOutput {
		t.Fatalf("y info %+v", y)
	}
	if must(g.FindTensor("w2")) != m.w2 {
		t.Fatal("FindTensor")
	}
	if !strings.Contains(must(g.Text()), "linear") {
		t.Fatal("text lacks the ops")
	}

	json := must(g.JSON())
	back := must(weft.GraphFromJSON(ctx, json))
	defer back.Close()
	if must(back.JSON()) != json {
		t.Fatal("canonical JSON is not stable")
	}
	h := must(g.Hash())
	if must(back.Hash()) != h || h == [2]uint64{} {
		t.Fatalf("hash %x vs %x", h, must(back.Hash()))
	}
	other := buildMLP(t, ctx, weft.DTypeBF16)
	if must(other.g.Hash()) == h {
		t.Fatal("a bf16 MLP hashes like the f32 one")
	}
	d := mlpData(4, weft.DTypeF32, 99)
	if !sameBits(must(runMLPF32(g, d, 4)), must(runMLPF32(back, d, 4))) {
		t.Fatal("the graph read back from JSON computes other bits")
	}
}

// symbolDoc is a symbol of a graph's canonical JSON.
type symbolDoc struct {
	Name    string  `json:"name"`
	Policy  string  `json:"policy"`
	Buckets []int64 `json:"buckets"`
}

// onlySymbol reads the one symbol of a graph's JSON.
func onlySymbol(t *testing.T, text string) symbolDoc {
	t.Helper()
	var doc struct {
		Symbols []symbolDoc `json:"symbols"`
	}
	if err := json.Unmarshal([]byte(text), &doc); err != nil || len(doc.Symbols) != 1 {
		t.Fatalf("graph JSON (%v): %s", err, text)
	}
	return doc.Symbols[0]
}

func TestSymbolPolicySurvivesJSONAndIsLeftOutOfTheHash(t *testing.T) {
	defer catch(t)
	ctx := newContext(t)
	m := buildMLP(t, ctx, weft.DTypeF32)
	plain, hash := must(m.g.JSON()), must(m.g.Hash())
	ok(m.g.SetSymbolPolicy("batch", weft.SymbolBuckets, 2, 4))
	text := must(m.g.JSON())
	if s := onlySymbol(t, text); s.Name != "batch" || s.Policy != "buckets" || !reflect.DeepEqual(s.Buckets, []int64{2, 4, 8}) {
		t.Fatalf("want batch, buckets [2 4 8] (the maximum added), got %+v", s)
	}
	// The kernels for one value are the same under every policy.
	if must(m.g.Hash()) != hash {
		t.Fatal("the policy changed the hash")
	}
	back := must(weft.GraphFromJSON(ctx, text))
	if must(back.JSON()) != text || must(back.Hash()) != hash {
		t.Fatal("the policy did not survive the JSON round trip")
	}
	for _, c := range []struct {
		policy weft.SymbolPolicy
		name   string
	}{{weft.SymbolExact, "exact"}, {weft.SymbolRuntime, "runtime"}, {weft.SymbolBuckets, "buckets"}} {
		ok(back.SetSymbolPolicy("batch", c.policy))
		j := must(back.JSON())
		if s := onlySymbol(t, j); s.Policy != c.name || s.Buckets != nil {
			t.Fatalf("want %s without buckets, got %+v", c.name, s)
		}
		if must(must(weft.GraphFromJSON(ctx, j)).JSON()) != j {
			t.Fatalf("%s did not survive the JSON round trip", c.name)
		}
	}
	// AUTO is the default, which the JSON leaves out.
	ok(back.SetSymbolPolicy("batch", weft.SymbolAuto))
	if must(back.JSON()) != plain {
		t.Fatal("AUTO is not the default")
	}
	// The reference does not depend on the policy.
	d := mlpData(3, weft.DTypeF32, 13)
	assertClose(t, "y (buckets)", must(runMLPF32(m.g, d, 3)), mlpExpected(d, 3, weft.DTypeF32), 1e-5, 1e-4)
}

func TestDecoderBlockOnTheReference(t *testing.T) {
	defer catch(t)
	g := buildDecoder(t, newContext(t))
	defer g.Close()
	ok(g.Validate())
	for _, batch := range []int{1, 3} {
		d := decoderData(batch, uint64(40+batch))
		r := must(runDecoderReference(g, d))
		checkDecoderSemantics(t, d, r)
		if !must(runDecoderReference(g, d)).equal(r) {
			t.Fatal("two runs on the same inputs differ")
		}
	}
	out := must(g.TensorInfo(must(g.FindTensor("out"))))
	if out.DType != weft.DTypeBF16 || !out.IsOutput || !reflect.DeepEqual(out.Dims, []weft.Dim{weft.S("batch"), weft.N(dD)}) {
		t.Fatalf("out info %+v", out)
	}
	if kc := must(g.TensorInfo(must(g.FindTensor("k_cache")))); kc.Kind != weft.State {
		t.Fatalf("k_cache info %+v", kc)
	}
	if n := len(must(g.Outputs())); n != len(decOutputs) {
		t.Fatalf("%d outputs", n)
	}
}

func TestDecoderBlockThroughJSONGivesIdenticalBits(t *testing.T) {
	defer catch(t)
	ctx := newContext(t)
	g := buildDecoder(t, ctx)
	json := must(g.JSON())
	back := must(weft.GraphFromJSON(ctx, json))
	if must(back.Hash()) != must(g.Hash()) || must(back.JSON()) != json {
		t.Fatal("hash or JSON differ after the round trip")
	}
	d := decoderData(4, 5)
	if !must(runDecoderReference(back, d)).equal(must(runDecoderReference(g, d))) {
		t.Fatal("the graph read back from JSON computes other bits")
	}
}

func TestReferenceRunsOneGraphFromSeveralGoroutines(t *testing.T) {
	defer catch(t)
	g := buildDecoder(t, newContext(t))
	d := decoderData(2, 77)
	want := must(runDecoderReference(g, d))
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := runDecoderReference(g, d)
			if err != nil || !r.equal(want) {
				errs <- name("concurrent run: %v", err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestMLPCompilesWithoutAGPU(t *testing.T) {
	defer catch(t)
	m := buildMLP(t, newContext(t), weft.DTypeBF16)
	r := must(m.g.Compile(&weft.CompileOptions{Arch: "sm_90a", NumSMs: 8, DisableCache: true}))
	t.Logf("compile report: %+v", r)
	if r.NumTasks <= 0 || r.NumEvents <= 0 || r.NumQueues <= 0 || r.NumQueues > 8 || r.CubinBytes <= 0 || r.ArenaBytes < 0 {
		t.Fatalf("report %+v", r)
	}
	if r.CacheHit || r.CompileMs <= 0 || r.TotalMs < r.CompileMs || r.LowerMs < 0 {
		t.Fatalf("report %+v", r)
	}
	if len(r.Key) != 32 || strings.Trim(r.Key, "0123456789abcdefABCDEF") != "" {
		t.Fatalf("key %q", r.Key)
	}
}
