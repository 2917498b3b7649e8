package abi

import "encoding/binary"

// Version is the ABI version this package implements. A plugin reports the
// version it was built for from the ExportABIVersion function; the host
// refuses any other.
const Version = 1

// Names of the functions and the memory a plugin exports.
const (
	// ExportABIVersion: () -> i32, the ABI version the plugin implements.
	ExportABIVersion = "ledge_abi_version"
	// ExportKinds: () -> i32, optional; a bit set of the call kinds the
	// plugin implements (KindFilter, KindCommitPolicy, KindTransform).
	// Without it the host infers the kinds from which of ExportFilter,
	// ExportPropose and ExportTransform exist.
	ExportKinds = "ledge_kinds"
	// ExportBuffer: (size i32) -> i32, the address of a buffer of at least
	// size bytes that the host may fill before the next call. The buffer
	// stays reserved for the host until the next ExportBuffer call.
	ExportBuffer = "ledge_buffer"
	// ExportInit: (kind i32, ptr i32, len i32) -> i32, configures the
	// instance for one call kind with the encoded parameters at [ptr,
	// ptr+len) of the buffer. 0 is success; a negative value is an error.
	ExportInit = "ledge_init"
	// ExportFilter: (ptr i32, len i32) -> i32, decides which records of the
	// input region at [ptr, ptr+len) to keep. It writes a bitmap into the
	// region's answer area and returns the number of bytes written, which
	// must be BitmapSize(count); a negative value is an error.
	ExportFilter = "ledge_filter"
	// ExportPropose: (ptr i32, len i32) -> i32, proposes a commit for the
	// input region. It writes ProposalSize bytes into the answer area and
	// returns ProposalSize; a negative value is an error.
	ExportPropose = "ledge_propose"
	// ExportMemory is the plugin's linear memory.
	ExportMemory = "memory"
	// ExportInitialize is the WASI reactor initializer, called once when an
	// instance starts (Go's -buildmode=c-shared exports it).
	ExportInitialize = "_initialize"
	// ExportStart is the WASI command entry point; a plugin must not be a
	// command.
	ExportStart = "_start"
)

// Call kinds, as passed to ExportInit and as bits of ExportKinds.
const (
	KindFilter       = 1
	KindCommitPolicy = 2
)

// HostModule is the import module of the host's own functions:
//
//	log(level i32, ptr i32, len i32)
//	error(ptr i32, len i32)
//	index(hay i32, hayLen i32, needle i32, needleLen i32) -> i32
//	json_get(doc i32, docLen i32, path i32, pathLen i32) -> i64
//	match_json(path i32, pathLen i32, want i32, wantLen i32, bitmap i32) -> i32
//	match_contains(needle i32, needleLen i32, bitmap i32) -> i32
//
// docs/PLUGINS.md defines each. WASIModule is the other linkable module.
const (
	HostModule = "ledge"
	WASIModule = "wasi_snapshot_preview1"
)

// Log levels of the host's log function.
const (
	LevelDebug = 0
	LevelInfo  = 1
	LevelWarn  = 2
	LevelError = 3
)

// Input region layout. All integers are little-endian; every offset is
// relative to the start of the region, so the region can be copied
// anywhere. Sections start on 8-byte boundaries.
//
//	header      HeaderSize bytes (below)
//	records     count entries of RecordEntrySize bytes
//	headers     headerCount entries of HeaderEntrySize bytes
//	data        keys, values, header keys and values, the topic name
//	answer      answerCap bytes, zeroed, for the plugin's answer
//
// Header:
//
//	off size field
//	 0   4   magic        InputMagic ("LPV1")
//	 4   4   version      Version
//	 8   4   size         total bytes of the region
//	12   4   count        records in the region
//	16   8   from         the position the poll read from
//	24   8   next         the position after this result
//	32   4   partition
//	36   4   topicOff
//	40   4   topicLen
//	44   4   recordsOff
//	48   4   headersOff
//	52   4   headerCount
//	56   4   answerOff
//	60   4   answerCap
//
// Record entry:
//
//	 0   8   offset
//	 8   8   timestamp    unix milliseconds
//	16   4   keyOff       0 when the key is null
//	20   4   keyLen       int32; -1 = null key
//	24   4   valueOff     0 when the value is null
//	28   4   valueLen     int32; -1 = null value
//	32   4   firstHeader  index of the record's first header entry
//	36   4   headerCount  number of header entries of the record
//
// Header entry:
//
//	 0   4   keyOff
//	 4   4   keyLen
//	 8   4   valueOff     0 when the value is null
//	12   4   valueLen     int32; -1 = null value
const (
	InputMagic      uint32 = 'L' | 'P'<<8 | 'V'<<16 | '1'<<24
	HeaderSize             = 64
	RecordEntrySize        = 40
	HeaderEntrySize        = 16
)

// Header field offsets.
const (
	offMagic       = 0
	offVersion     = 4
	offSize        = 8
	offCount       = 12
	offFrom        = 16
	offNext        = 24
	offPartition   = 32
	offTopicOff    = 36
	offTopicLen    = 40
	offRecordsOff  = 44
	offHeadersOff  = 48
	offHeaderCount = 52
	offAnswerOff   = 56
	offAnswerCap   = 60
)

// Proposal answer layout (ProposalSize bytes):
//
//	0   4   decision     ProposeNone or ProposeCommit
//	4   4   reserved     0
//	8   8   through      with ProposeCommit: commit through this offset
//	                     (the committed position becomes through+1)
const (
	ProposalSize  = 16
	ProposeNone   = 0
	ProposeCommit = 1
)

// BitmapSize returns the size in bytes of a filter's answer for count
// records: bit i (byte i/8, bit i%8, least significant first) is set when
// record i is kept. Bits past count must be zero.
func BitmapSize(count int) int { return (count + 7) / 8 }

// answerCap is the size of the answer area of a region of count records:
// room for a bitmap or a proposal, whichever is larger.
func answerCap(count int) int { return align8(max(BitmapSize(count), ProposalSize)) }

func align8(n int) int { return (n + 7) &^ 7 }

var le = binary.LittleEndian
