package registry

// SourceCodecs returns codecs equal (by format.Codec Identity) to those a
// source with options o reads values and keys with: its format,
// value.format and key.format options, JSON by default. A CLI pipeline's
// nodes build the table of the codec of records that cross nodes
// (clicodec.New) from them, so that a record still undecoded travels as
// its bytes. The error is about the options' formats.
func SourceCodecs(o Options) (*Codecs, error) { return sourceCodecs(o) }
