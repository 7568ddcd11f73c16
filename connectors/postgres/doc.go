// Package postgres is sluice's PostgreSQL connector: a sink of rows into a
// table, exactly-once with prepared transactions (two-phase commit) or
// at-least-once, appending with COPY or upserting with INSERT … ON
// CONFLICT … DO UPDATE. See README.md for every option and the caveats of
// prepared transactions.
package postgres
