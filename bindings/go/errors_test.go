package weft_test

// Every error path returns a *weft.Error with weft's status and message.

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	weft "github.com/weft-project/weft/bindings/go"
)

// expectErr checks err is a *weft.Error of status whose message holds every needle.
func expectErr(t *testing.T, err error, status weft.Status, needles ...string) *weft.Error {
	t.Helper()
	var we *weft.Error
	if !errors.As(err, &we) {
		t.Fatalf("want a *weft.Error of %v, got %v", status, err)
	}
	t.Log(we)
	if we.Status != status {
		t.Fatalf("status %v, want %v: %v", we.Status, status, we)
	}
	if !errors.Is(err, &weft.Error{Status: status}) {
		t.Fatalf("errors.Is does not match the status: %v", we)
	}
	for _, n := range needles {
		if !strings.Contains(we.Message, n) {
			t.Fatalf("message lacks %q: %v", n, we)
		}
	}
	if !strings.HasPrefix(we.Error(), status.String()+": ") {
		t.Fatalf("Error() is %q", we.Error())
	}
	return we
}

func TestShapeMismatchNamesTheOpAndOperand(t *testing.T) {
	defer catch(t)
	g := must(weft.NewGraph(newContext(t), "bad"))
	x := must(g.Input("x", weft.DTypeF32, weft.N(2), weft.N(64)))
	w := must(g.Weight("w_wrong", weft.DTypeF32, weft.N(32), weft.N(48)))
	_, err := g.Linear(x, w, weft.None, weft.None, "y")
	expectErr(t, err, weft.ErrInvalidArgument, "linear", "'weight'", "48")
	// The graph stays usable after a rejected op.
	w = must(g.Weight("w", weft.DTypeF32, weft.N(32), weft.N(64)))
	must(g.Linear(x, w, weft.None, weft.None, "y"))
}

func TestUndefinedSymbolIsNamed(t *testing.T) {
	defer catch(t)
	g := must(weft.NewGraph(newContext(t), "bad"))
	ok(g.DeclareSymbol("batch", 1, 8))
	_, err := g.Input("x", weft.DTypeF32, weft.S("seq"), weft.N(4))
	expectErr(t, err, weft.ErrInvalidArgument, "seq")
	expectErr(t, g.DeclareSymbol("batch", 1, 4), weft.ErrInvalidArgument, "batch")
	expectErr(t, g.DeclareSymbol("empty", 5, 2), weft.ErrInvalidArgument, "empty")
}

func TestSymbolPolicyErrorsNameTheProblem(t *testing.T) {
	defer catch(t)
	m := buildMLP(t, newContext(t), weft.DTypeF32)
	expectErr(t, m.g.SetSymbolPolicy("seq", weft.SymbolExact), weft.ErrInvalidArgument,
		"weft_graph_set_symbol_policy", "symbol 'seq' is not declared")
	expectErr(t, m.g.SetSymbolPolicy("batch", weft.SymbolBuckets, 4, 2), weft.ErrInvalidArgument,
		"symbol 'batch'", "bucket 1 is 2", "not above the one before (4)", "ascending")
	expectErr(t, m.g.SetSymbolPolicy("batch", weft.SymbolBuckets, 100), weft.ErrInvalidArgument,
		"bucket 0 is 100", "[1, 8]")
	expectErr(t, m.g.SetSymbolPolicy("batch", weft.SymbolRuntime, 2, 4), weft.ErrInvalidArgument,
		"symbol 'batch'", "a bucket list is only for the BUCKETS policy")
	expectErr(t, m.g.SetSymbolPolicy("batch", weft.SymbolPolicy(7)), weft.ErrInvalidArgument,
		"policy 7", "AUTO, EXACT, BUCKETS or RUNTIME")
	expectErr(t, m.g.SetSymbolPolicy("ba\x00tch", weft.SymbolExact), weft.ErrInvalidArgument, "NUL")
	if strings.Contains(must(m.g.JSON()), "policy") {
		t.Fatal("a refused policy changed the graph")
	}
}

func TestProgramOptionsAndStatsErrorsWithoutADevice(t *testing.T) {
	defer catch(t)
	m := buildMLP(t, newContext(t), weft.DTypeF32)
	// Checked before any device is opened.
	_, err := weft.NewProgram(m.g, &weft.ProgramOptions{DeviceOrdinal: -1, MaxLoadedKernels: -1})
	expectErr(t, err, weft.ErrInvalidArgument, "weft_program_create", "max_loaded_kernels is -1")
	_, err = (&weft.Program{}).Stats() // no handle
	expectErr(t, err, weft.ErrInvalidHandle, "weft_program_get_stats")
}

func mlpBindings(t *testing.T, m *mlp, d [5][]float32, xShape []int64, y []float32) *weft.HostBindings {
	var b weft.HostBindings
	shapes := mlpShapes(len(y) / mlpN)
	ok(b.Float32(m.x, d[0], xShape...))
	for i, tensor := range []weft.Tensor{m.w1, m.b1, m.w2, m.b2} {
		ok(b.Float32(tensor, d[i+1], shapes[i+1]...))
	}
	if y != nil {
		ok(b.Float32(m.y, y, shapes[5]...))
	}
	return &b
}

func TestWrongBindingShapeIsNamed(t *testing.T) {
	defer catch(t)
	m := buildMLP(t, newContext(t), weft.DTypeF32)
	d := mlpData(2, weft.DTypeF32, 3)
	d[0] = make([]float32, 2*(mlpK+1))
	b := mlpBindings(t, m, d, []int64{2, mlpK + 1}, make([]float32, 2*mlpN))
	expectErr(t, m.g.RunReference(b), weft.ErrInvalidArgument, "'x'", "65")
}

func TestSymbolOutOfRangeAndMissingBinding(t *testing.T) {
	defer catch(t)
	m := buildMLP(t, newContext(t), weft.DTypeF32)
	batch := 9 // declared in [1, 8]
	d := mlpData(batch, weft.DTypeF32, 3)
	b := mlpBindings(t, m, d, []int64{int64(batch), mlpK}, nil)
	expectErr(t, m.g.RunReference(b), weft.ErrInvalidArgument, "'y'", "not bound")
	ok(b.Float32(m.x, d[0], int64(batch), mlpK))
	expectErr(t, m.g.RunReference(b), weft.ErrInvalidArgument, "'x'", "bound twice")
	b = mlpBindings(t, m, d, []int64{int64(batch), mlpK}, make([]float32, batch*mlpN))
	expectErr(t, m.g.RunReference(b), weft.ErrInvalidArgument, "batch", "[1, 8]")
}

func TestSlicesAreCheckedBeforeWeftSeesThem(t *testing.T) {
	defer catch(t)
	m := buildMLP(t, newContext(t), weft.DTypeF32)
	var b weft.HostBindings
	expectErr(t, b.Float32(m.x, make([]float32, 10), 1, mlpK), weft.ErrInvalidArgument, "10")
	expectErr(t, b.Float32(m.x, make([]float32, 10), -1, 10), weft.ErrInvalidArgument, "negative")
	_, err := m.g.FindTensor("a\x00b")
	expectErr(t, err, weft.ErrInvalidArgument, "NUL")
}

func TestMalformedJSONIsRejected(t *testing.T) {
	defer catch(t)
	ctx := newContext(t)
	for _, c := range []struct{ doc, needle string }{{`{"ops": [1, 2`, "parse"}, {"{}", "format"}, {"not json", "parse"}} {
		_, err := weft.GraphFromJSON(ctx, c.doc)
		expectErr(t, err, weft.ErrInvalidArgument, c.needle)
	}
	valid := must(buildMLP(t, ctx, weft.DTypeF32).g.JSON())
	broken := strings.Replace(valid, `"batch"`, "17", 1)
	_, err := weft.GraphFromJSON(ctx, broken)
	expectErr(t, err, weft.ErrInvalidArgument, "symbols[0].name")
}

func TestBadCompileArchIsRejected(t *testing.T) {
	defer catch(t)
	m := buildMLP(t, newContext(t), weft.DTypeF32)
	_, err := m.g.Compile(&weft.CompileOptions{Arch: "sm_42", DisableCache: true})
	expectErr(t, err, weft.ErrInvalidArgument, "sm_42")
}

func TestForeignTensorDoubleOutputAndUnknownOp(t *testing.T) {
	defer catch(t)
	ctx := newContext(t)
	a := must(weft.NewGraph(ctx, "a"))
	b := must(weft.NewGraph(ctx, "b"))
	xa := must(a.Input("x", weft.DTypeF32, weft.N(4)))
	must(b.Input("x", weft.DTypeF32, weft.N(4)))
	_, err := b.SiLU(xa, "")
	expectErr(t, err, weft.ErrInvalidArgument, "silu", "another graph")
	y := must(a.SiLU(xa, "y"))
	ok(a.MarkOutput(y, ""))
	expectErr(t, a.MarkOutput(y, ""), weft.ErrInvalidArgument, "'y'")
	expectErr(t, a.MarkOutput(xa, ""), weft.ErrInvalidArgument, "'x'")
	_, err = a.FindTensor("nope")
	expectErr(t, err, weft.ErrInvalidArgument, "nope")
	_, err = a.Op("no_such_op", []weft.Tensor{xa}, "", "")
	expectErr(t, err, weft.ErrInvalidArgument, "no_such_op")
	_, err = a.Op("silu", []weft.Tensor{xa}, `{"bogus": 1}`, "")
	expectErr(t, err, weft.ErrInvalidArgument, "bogus")
}

func TestPositionOutsideTheCacheIsARunTimeError(t *testing.T) {
	defer catch(t)
	g := buildDecoder(t, newContext(t))
	d := decoderData(2, 9)
	d.pos[1] = dSeq
	_, err := runDecoderReference(g, d)
	expectErr(t, err, weft.ErrInvalidArgument, "attention_decode", "row 1")
}

func TestCloseTwiceAndUseAfterClose(t *testing.T) {
	defer catch(t)
	ctx := must(weft.NewContext())
	m := buildMLP(t, ctx, weft.DTypeF32)
	// The graph keeps its context alive: closing the context first is fine.
	ok(ctx.Close())
	ok(ctx.Close())
	ok(m.g.Validate())
	ok(m.g.Close())
	ok(m.g.Close())
	expectErr(t, m.g.Validate(), weft.ErrInvalidHandle)
	_, err := m.g.SiLU(m.x, "")
	expectErr(t, err, weft.ErrInvalidHandle)
	_, err = weft.NewGraph(ctx, "after close")
	expectErr(t, err, weft.ErrInvalidHandle)
	// A zero Program / Model is closed already; closing is still safe.
	ok((&weft.Program{}).Close())
	ok((&weft.Model{}).Close())
}

func TestFinalizersReleaseForgottenHandles(t *testing.T) {
	defer catch(t)
	ctx := must(weft.NewContext())
	for i := 0; i < 50; i++ {
		buildDecoder(t, ctx) // never closed: the finalizer destroys it
	}
	runtime.GC()
	runtime.GC()
	// weft still works after the finalizers ran (no double destroy, no dangling handle).
	m := buildMLP(t, ctx, weft.DTypeF32)
	d := mlpData(2, weft.DTypeF32, 1)
	assertClose(t, "y", must(runMLPF32(m.g, d, 2)), mlpExpected(d, 2, weft.DTypeF32), 1e-5, 1e-4)
	ok(ctx.Close())
}
