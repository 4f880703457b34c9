module github.com/gohtgs/htgs

go 1.24.0

require (
	github.com/disintegration/imaging v1.6.2
	github.com/ebitengine/purego v0.10.2
	go.uber.org/goleak v1.3.0
	golang.org/x/image v0.36.0
	gonum.org/v1/gonum v0.17.0
)
