module github.com/sluice-io/sluice

go 1.26
