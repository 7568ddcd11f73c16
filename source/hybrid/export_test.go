package hybrid

// ExpectOnce is expectOnce for the external tests.
var ExpectOnce = expectOnce
