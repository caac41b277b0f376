package weft_test

// Models: a random tiny Llama checkpoint (written by the weft command in $WEFT_CLI, or a folder named in
// $WEFT_MODEL_DIR) generated greedily on the CPU reference.

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	weft "github.com/weft-project/weft/bindings/go"
)

func checkpoint(t *testing.T) string {
	if dir := os.Getenv("WEFT_MODEL_DIR"); dir != "" {
		return dir
	}
	cli := os.Getenv("WEFT_CLI")
	if cli == "" {
		t.Skip("set WEFT_CLI to the weft command (or WEFT_MODEL_DIR to a model folder)")
	}
	dir := filepath.Join(t.TempDir(), "tiny-llama")
	if out, err := exec.Command(cli, "checkpoint", "tiny-llama", dir).CombinedOutput(); err != nil {
		t.Fatalf("weft checkpoint: %v: %s", err, out)
	}
	return dir
}

func TestLoadingAMissingFolderNamesIt(t *testing.T) {
	defer catch(t)
	_, err := weft.LoadModel(newContext(t), filepath.Join(os.TempDir(), "weft-no-such-model-folder"),
		&weft.ModelOptions{Backend: weft.BackendReference})
	expectErr(t, err, weft.ErrInvalidArgument, "weft-no-such-model-folder")
}

func TestGreedyGenerationOnTheReference(t *testing.T) {
	defer catch(t)
	dir := checkpoint(t)
	m := must(weft.LoadModel(newContext(t), dir, &weft.ModelOptions{Backend: weft.BackendReference, MaxBatch: 2, MaxSeq: 16}))
	defer m.Close()
	info := must(m.Info())
	t.Logf("%+v", info)
	if info.Backend != weft.BackendReference || info.MaxBatch != 2 || info.MaxSeq != 16 || info.Layers < 1 ||
		info.Vocab <= 0 || info.WeightBytes <= 0 || (info.ModelType != "llama" && info.ModelType != "qwen3") {
		t.Fatalf("info %+v", info)
	}
	vocab, batch, steps := int(info.Vocab), 2, 4
	req := weft.GenerateRequest{Batch: 2, PromptLen: 3, Steps: 4, PromptIDs: []int32{1, 5, 9, 100, 7, 3}, WantLogits: true}
	g := must(m.Generate(&req))
	if len(g.Tokens) != batch*steps || len(g.StepMs) != steps {
		t.Fatalf("generation %+v", g)
	}
	// Each token is the first maximum of its step's logits.
	for s := 0; s < steps; s++ {
		for b := 0; b < batch; b++ {
			row := g.Logits[(s*batch+b)*vocab : (s*batch+b+1)*vocab]
			best := 0
			for i, v := range row {
				if v > row[best] {
					best = i
				}
			}
			if int(g.Tokens[b*steps+s]) != best {
				t.Fatalf("step %d row %d: token %d, argmax %d", s, b, g.Tokens[b*steps+s], best)
			}
		}
	}
	// Deterministic, and teacher forcing with its own tokens changes nothing.
	if again := must(m.Generate(&req)); !reflect.DeepEqual(again.Tokens, g.Tokens) {
		t.Fatalf("tokens %v then %v", g.Tokens, again.Tokens)
	}
	forced := req
	forced.ForcedIDs, forced.WantLogits = g.Tokens, false
	if f := must(m.Generate(&forced)); !reflect.DeepEqual(f.Tokens, g.Tokens) {
		t.Fatalf("teacher forcing: %v, free: %v", f.Tokens, g.Tokens)
	}

	bad := req
	bad.PromptIDs = []int32{int32(vocab), 0, 0, 0, 0, 0}
	_, err := m.Generate(&bad)
	expectErr(t, err, weft.ErrInvalidArgument, "prompt[0][0]")
	bad = req
	bad.Batch, bad.PromptIDs = 3, make([]int32, 9)
	_, err = m.Generate(&bad)
	expectErr(t, err, weft.ErrInvalidArgument, "batch")
	bad = req
	bad.PromptIDs = req.PromptIDs[:5]
	_, err = m.Generate(&bad)
	expectErr(t, err, weft.ErrInvalidArgument, "PromptIDs")
}
