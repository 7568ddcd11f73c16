module github.com/cockroachdb/apd/v3

go 1.17

require github.com/lib/pq v1.10.7
