package weft_test

// The conformance cases on a GPU program, compared with the CPU reference. Without a GPU each test logs why
// it skipped (t.Skip) and passes.

import (
	"testing"

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
