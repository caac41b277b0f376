module github.com/weft-project/weft/bindings/go

go 1.19
