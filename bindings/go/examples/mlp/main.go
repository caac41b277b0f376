// A two-layer MLP (linear -> silu -> linear) with a symbolic batch: built, printed, run on the CPU reference,
// compiled to a cubin (no GPU needed), and run on the GPU when there is one.
//
//	CGO_LDFLAGS="-L$BUILD -Wl,-rpath,$BUILD" go run ./examples/mlp
package main

import (
	"fmt"
	"math"
	"os"

	weft "github.com/weft-project/weft/bindings/go"
	"github.com/weft-project/weft/bindings/go/cuda"
)

const (
	batch   = 4
	dIn     = 64
	dHidden = 128
	dOut    = 32
)

// fill gives deterministic values in [-scale, scale) (the LCG of samples/mlp.c).
func fill(n int, seed uint64, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		seed = seed*6364136223846793005 + 1442695040888963407
		v[i] = scale * (float32(seed>>40)/float32(1<<24)*2 - 1)
	}
	return v
}

func run() error {
	fmt.Println("weft", weft.VersionString())
	ctx, err := weft.NewContext()
	if err != nil {
		return err
	}
	defer ctx.Close()
	g, err := weft.NewGraph(ctx, "mlp")
	if err != nil {
		return err
	}
	defer g.Close()

	// Keeps the first error; later steps still run but fail harmlessly on their None operands.
	keep := func(t weft.Tensor, e error) weft.Tensor {
		if err == nil {
			err = e
		}
		return t
	}
	err = g.DeclareSymbol("batch", 1, 64)
	x := keep(g.Input("x", weft.DTypeF32, weft.S("batch"), weft.N(dIn)))
	w1 := keep(g.Weight("w1", weft.DTypeF32, weft.N(dHidden), weft.N(dIn)))
	b1 := keep(g.Weight("b1", weft.DTypeF32, weft.N(dHidden)))
	w2 := keep(g.Weight("w2", weft.DTypeF32, weft.N(dOut), weft.N(dHidden)))
	b2 := keep(g.Weight("b2", weft.DTypeF32, weft.N(dOut)))
	h := keep(g.Linear(x, w1, b1, weft.None, "h"))
	a := keep(g.SiLU(h, "a"))
	y := keep(g.Linear(a, w2, b2, weft.None, "y"))
	if err != nil {
		return err
	}
	if err := g.MarkOutput(y, ""); err != nil {
		return err
	}
	text, err := g.Text()
	if err != nil {
		return err
	}
	fmt.Print(text)

	tensors := []weft.Tensor{x, w1, b1, w2, b2}
	data := [][]float32{fill(batch*dIn, 1, 1), fill(dHidden*dIn, 2, 0.125), fill(dHidden, 3, 0.1),
		fill(dOut*dHidden, 4, 0.09), fill(dOut, 5, 0.1)}
	shapes := [][]int64{{batch, dIn}, {dHidden, dIn}, {dHidden}, {dOut, dHidden}, {dOut}, {batch, dOut}}
	yv := make([]float32, batch*dOut)
	var b weft.HostBindings
	for i, t := range tensors {
		if err := b.Float32(t, data[i], shapes[i]...); err != nil {
			return err
		}
	}
	if err := b.Float32(y, yv, shapes[5]...); err != nil {
		return err
	}
	if err := g.RunReference(&b); err != nil {
		return err
	}
	var sum float32
	for _, v := range yv {
		sum += v
	}
	fmt.Printf("reference: y [%d, %d] sum %.6f  y[0][0..4] %v\n", batch, dOut, sum, yv[:4])

	r, err := g.Compile(&weft.CompileOptions{DisableCache: true})
	if err != nil {
		return err
	}
	fmt.Printf("compiled for sm_90a: %d tasks, %d queues, cubin %d bytes, %.1f ms\n", r.NumTasks, r.NumQueues, r.CubinBytes, r.TotalMs)

	if n, err := weft.DeviceCount(); err != nil || n == 0 {
		if err == nil {
			err = fmt.Errorf("weft_device_count reports 0 devices")
		}
		fmt.Println("gpu: skipped: no GPU:", err)
		return nil
	}
	return runOnGPU(g, append(tensors, y), data, shapes, yv)
}

func runOnGPU(g *weft.Graph, tensors []weft.Tensor, data [][]float32, shapes [][]int64, want []float32) error {
	drv, err := cuda.Open(0)
	if err != nil {
		return err
	}
	defer drv.Close()
	unbind, err := drv.Bind()
	if err != nil {
		return err
	}
	defer unbind()
	var db weft.DeviceBindings
	bufs := make([]*cuda.Buffer, len(tensors))
	for i, t := range tensors {
		if i < len(data) {
			bufs[i], err = cuda.Upload(drv, data[i])
		} else {
			bufs[i], err = drv.Alloc(len(want) * 4)
		}
		if err != nil {
			return err
		}
		defer bufs[i].Free()
		db.Add(t, bufs[i].Ptr, weft.DTypeF32, shapes[i]...)
	}
	p, err := weft.NewProgram(g, &weft.ProgramOptions{DeviceOrdinal: 0})
	if err != nil {
		return err
	}
	defer p.Close()
	if err := p.Run(&db, 0); err != nil {
		return err
	}
	if err := p.Synchronize(0); err != nil {
		return err
	}
	got := make([]float32, len(want))
	if err := cuda.CopyOut(bufs[len(bufs)-1], got); err != nil {
		return err
	}
	var maxDiff float64
	for i := range got {
		maxDiff = math.Max(maxDiff, math.Abs(float64(got[i]-want[i])))
	}
	fmt.Printf("gpu: max |gpu - reference| = %.3g\n", maxDiff)
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "weft error:", err)
		os.Exit(1)
	}
}
