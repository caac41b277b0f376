package weft_test

// The conformance cases on a GPU program, compared with the CPU reference. Without a GPU each test logs why
// it skipped (t.Skip) and passes.

import (
	"testing"
	"time"

	weft "github.com/weft-project/weft/bindings/go"
	"github.com/weft-project/weft/bindings/go/cuda"
)

// gpu opens device 0 with its primary context current (the goroutine stays on its thread until the test
// ends), or skips the test saying why there is no GPU.
func gpu(t *testing.T) *cuda.Driver {
	n, err := weft.DeviceCount()
	if err != nil {
		t.Skipf("no GPU: %v", err)
	}
	if n < 1 {
		t.Skip("no GPU: weft_device_count reports 0 devices")
	}
	drv, err := cuda.Open(0)
	if err != nil {
		t.Fatalf("weft sees %d GPUs but the driver API cannot open one: %v", n, err)
	}
	unbind, err := drv.Bind()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unbind(); drv.Close() })
	return drv
}

func upload[T any](t *testing.T, drv *cuda.Driver, data []T) *cuda.Buffer {
	b, err := cuda.Upload(drv, data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Free)
	return b
}

func alloc(t *testing.T, drv *cuda.Driver, bytes int) *cuda.Buffer {
	b, err := drv.Alloc(bytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Free)
	return b
}

func program(t *testing.T, g *weft.Graph) *weft.Program {
	p := must(weft.NewProgram(g, &weft.ProgramOptions{DeviceOrdinal: 0}))
	t.Cleanup(func() { p.Close() })
	return p
}

func TestProgramCreateWithoutAGPUIsACUDAError(t *testing.T) {
	defer catch(t)
	if n, err := weft.DeviceCount(); err == nil && n > 0 {
		t.Skipf("a GPU is present (%d devices): program creation succeeds there", n)
	}
	m := buildMLP(t, newContext(t), weft.DTypeF32)
	_, err := weft.NewProgram(m.g, nil)
	expectErr(t, err, weft.ErrCUDA)
	_, err = cuda.Open(0)
	if err == nil {
		t.Fatal("the driver opened where weft found none")
	}
	t.Log(err)
}

func TestMLPOnTheGPUMatchesTheReference(t *testing.T) {
	defer catch(t)
	drv := gpu(t)
	m := buildMLP(t, newContext(t), weft.DTypeBF16)
	p := program(t, m.g)
	for _, batch := range []int{3, 8} { // the second batch size specializes a new kernel
		d := mlpData(batch, weft.DTypeBF16, uint64(21+batch))
		shapes := mlpShapes(batch)
		var b weft.DeviceBindings
		for i, tensor := range []weft.Tensor{m.x, m.w1, m.b1, m.w2, m.b2} {
			b.Add(tensor, upload(t, drv, toBF16(d[i])).Ptr, weft.DTypeBF16, shapes[i]...)
		}
		yDev := alloc(t, drv, batch*mlpN*2)
		b.Add(m.y, yDev.Ptr, weft.DTypeBF16, shapes[5]...)
		ok(p.Run(&b, 0))
		ok(p.Synchronize(0))
		y := make([]weft.BF16, batch*mlpN)
		ok(cuda.CopyOut(yDev, y))
		assertClose(t, name("gpu y (batch %d)", batch), toF32(y), mlpExpected(d, batch, weft.DTypeBF16), 0.02, 0.02)
	}
}

// decoderDeviceBindings uploads d and binds it (positions from pos) with fresh output buffers.
func decoderDeviceBindings(t *testing.T, drv *cuda.Driver, g *weft.Graph, d *decData, pos []int32,
	kc, vc *cuda.Buffer) (*weft.DeviceBindings, []*cuda.Buffer) {
	var b weft.DeviceBindings
	bind := func(name string, buf *cuda.Buffer, dtype weft.DType) {
		b.Add(must(g.FindTensor(name)), buf.Ptr, dtype, decShape(name, d.batch)...)
	}
	bind("x", upload(t, drv, d.x), weft.DTypeBF16)
	bind("positions", upload(t, drv, pos), weft.DTypeI32)
	for i, w := range decWeights {
		bind(w.name, upload(t, drv, d.weights[i]), weft.DTypeBF16)
	}
	bind("k_cache", kc, weft.DTypeBF16)
	bind("v_cache", vc, weft.DTypeBF16)
	var outs []*cuda.Buffer
	for _, o := range decOutputs {
		buf := alloc(t, drv, count(decShape(o, d.batch))*2)
		bind(o, buf, weft.DTypeBF16)
		outs = append(outs, buf)
	}
	return &b, outs
}

func TestDecoderBlockOnTheGPUMatchesTheReference(t *testing.T) {
	defer catch(t)
	drv := gpu(t)
	g := buildDecoder(t, newContext(t))
	d := decoderData(3, 31)
	want := must(runDecoderReference(g, d))

	p := program(t, g)
	kc, vc := upload(t, drv, d.kCache), upload(t, drv, d.vCache)
	b, outs := decoderDeviceBindings(t, drv, g, d, d.pos, kc, vc)
	ok(p.Run(b, 0))
	ok(p.Synchronize(0))
	got := &decResult{kCache: make([]weft.BF16, len(d.kCache)), vCache: make([]weft.BF16, len(d.vCache))}
	for i, buf := range outs {
		o := make([]weft.BF16, len(want.outputs[i]))
		ok(cuda.CopyOut(buf, o))
		got.outputs = append(got.outputs, o)
	}
	ok(cuda.CopyOut(kc, got.kCache))
	ok(cuda.CopyOut(vc, got.vCache))
	// The GPU's own results hang together op by op (its cache writes are its k / v bit for bit) ...
	checkDecoderSemantics(t, d, got)
	// ... and stay close to the reference's.
	for i, o := range decOutputs {
		assertClose(t, "gpu "+o, toF32(got.outputs[i]), toF32(want.outputs[i]), 0.05, 0.05)
	}
	assertClose(t, "gpu k_cache", toF32(got.kCache), toF32(want.kCache), 0.05, 0.05)
	assertClose(t, "gpu v_cache", toF32(got.vCache), toF32(want.vCache), 0.05, 0.05)

	// A position past the cache fails on the device; Synchronize reports it and the program stays usable.
	bad := make([]int32, d.batch)
	for i := range bad {
		bad[i] = dSeq
	}
	b2, _ := decoderDeviceBindings(t, drv, g, d, bad, kc, vc)
	err := p.Run(b2, 0)
	if err == nil {
		err = p.Synchronize(0)
	}
	expectErr(t, err, weft.ErrInvalidArgument)
	ok(p.Run(b, 0))
	ok(p.Synchronize(0))
}

func TestProgramRejectsAWrongBindingShape(t *testing.T) {
	defer catch(t)
	drv := gpu(t)
	m := buildMLP(t, newContext(t), weft.DTypeF32)
	p := program(t, m.g)
	buf := alloc(t, drv, 1<<16)
	var b weft.DeviceBindings
	shapes := mlpShapes(2)
	b.Add(m.x, buf.Ptr, weft.DTypeF32, 2, mlpK+1)
	for i, tensor := range []weft.Tensor{m.w1, m.b1, m.w2, m.b2, m.y} {
		b.Add(tensor, buf.Ptr, weft.DTypeF32, shapes[i+1]...)
	}
	expectErr(t, p.Run(&b, 0), weft.ErrInvalidArgument, "'x'")
}

// runMLPChecked runs the f32 MLP for batch rows on p and checks the result against the arithmetic done here.
func runMLPChecked(t *testing.T, drv *cuda.Driver, p *weft.Program, m *mlp, batch int, seed uint64) {
	t.Helper()
	d := mlpData(batch, weft.DTypeF32, seed)
	shapes := mlpShapes(batch)
	var b weft.DeviceBindings
	for i, tensor := range []weft.Tensor{m.x, m.w1, m.b1, m.w2, m.b2} {
		b.Add(tensor, upload(t, drv, d[i]).Ptr, weft.DTypeF32, shapes[i]...)
	}
	yDev := alloc(t, drv, batch*mlpN*4)
	b.Add(m.y, yDev.Ptr, weft.DTypeF32, shapes[5]...)
	ok(p.Run(&b, 0))
	ok(p.Synchronize(0))
	y := make([]float32, batch*mlpN)
	ok(cuda.CopyOut(yDev, y))
	assertClose(t, name("gpu y (batch %d)", batch), y, mlpExpected(d, batch, weft.DTypeF32), 2e-3, 2e-3)
}

// settledStats is p's stats once no specialization compiles in the background any more (or after 300 s).
func settledStats(p *weft.Program) weft.ProgramStats {
	deadline := time.Now().Add(300 * time.Second)
	s := must(p.Stats())
	for s.Pending > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		s = must(p.Stats())
	}
	return s
}

func TestLazyProgramRunsOnTheGenericKernelAndReportsStats(t *testing.T) {
	defer catch(t)
	drv := gpu(t)
	m := buildMLP(t, newContext(t), weft.DTypeF32)
	// Batch 3 runs on the kernel for 4; the generic kernel is the one for 8.
	ok(m.g.SetSymbolPolicy("batch", weft.SymbolBuckets, 2, 4))
	p := must(weft.NewProgram(m.g, &weft.ProgramOptions{DeviceOrdinal: 0, Lazy: true, MaxLoadedKernels: 4}))
	t.Cleanup(func() { p.Close() })
	s := must(p.Stats())
	t.Logf("fresh program: %+v", s)
	if s.Compiles != 0 || s.CacheLoads != 0 || s.Evictions != 0 || s.GenericRuns != 0 || s.Pending != 0 || s.Loaded != 0 {
		t.Fatalf("a fresh program has done something: %+v", s)
	}
	if s.HostJITMs < 0 || (!s.HostJIT && (s.HostJITCacheHit || s.HostJITMs != 0)) {
		t.Fatalf("host JIT fields: %+v", s)
	}

	// The kernel for 4 is not loaded: the generic kernel serves the run while it compiles.
	runMLPChecked(t, drv, p, m, 3, 41)
	s = must(p.Stats())
	if s.GenericRuns != 1 || s.Evictions != 0 || s.Compiles+s.CacheLoads < 1 || s.Loaded < 1 {
		t.Fatalf("after the first run: %+v", s)
	}
	s = settledStats(p)
	if s.Pending != 0 {
		t.Fatalf("the background compile did not finish: %+v", s)
	}
	if s.Loaded != 2 || s.Compiles+s.CacheLoads != 2 {
		t.Fatalf("want the generic kernel and the one for 4 loaded: %+v", s)
	}

	// Now on its own specialization.
	runMLPChecked(t, drv, p, m, 3, 42)
	if s = must(p.Stats()); s.GenericRuns != 1 {
		t.Fatalf("the specialization did not serve the run: %+v", s)
	}
}

func TestMaxLoadedKernelsEvictsTheLeastRecentlyUsed(t *testing.T) {
	defer catch(t)
	drv := gpu(t)
	m := buildMLP(t, newContext(t), weft.DTypeF32)
	ok(m.g.SetSymbolPolicy("batch", weft.SymbolBuckets, 2, 4))
	p := must(weft.NewProgram(m.g, &weft.ProgramOptions{DeviceOrdinal: 0, MaxLoadedKernels: 1}))
	t.Cleanup(func() { p.Close() })
	// Buckets 2 and 4: the second unloads the first.
	runMLPChecked(t, drv, p, m, 1, 51)
	runMLPChecked(t, drv, p, m, 3, 52)
	s := must(p.Stats())
	if s.Loaded != 1 || s.Evictions != 1 || s.GenericRuns != 0 || s.Pending != 0 || s.Compiles+s.CacheLoads != 2 {
		t.Fatalf("want one kernel loaded after one eviction: %+v", s)
	}
}
