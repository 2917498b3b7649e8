;; A Ledge filter plugin written in WebAssembly text, from docs/PLUGINS.md
;; alone: it keeps the records whose value starts with the bytes of the
;; parameter "prefix".
;;
;;   wat2wasm prefix.wat -o prefix.wasm
;;   ledge plugin test prefix.wasm --input records.jsonl --param prefix=temp
;;
;; Memory map: [0, 1024) the prefix; [1024, 4096) messages; [4096, ...) the
;; buffer lent to the host.
(module
  (import "ledge" "log" (func $log (param i32 i32 i32)))
  (import "ledge" "error" (func $error (param i32 i32)))

  (memory (export "memory") 1)

  (global $prefix_len (mut i32) (i32.const 0))
  (global $buffer i32 (i32.const 4096))

  (data (i32.const 1024) "prefix")                         ;; 6 bytes
  (data (i32.const 1040) "missing parameter \"prefix\"")   ;; 26 bytes
  (data (i32.const 1072) "prefix longer than 1024 bytes")  ;; 29 bytes
  (data (i32.const 1104) "this plugin is a filter only")   ;; 28 bytes
  (data (i32.const 1136) "prefix filter ready")            ;; 19 bytes

  (func (export "ledge_abi_version") (result i32) (i32.const 1))
  (func (export "ledge_kinds") (result i32) (i32.const 1)) ;; filter

  ;; ledge_buffer(size) -> address of at least size bytes, growing memory.
  (func (export "ledge_buffer") (param $size i32) (result i32)
    (local $need i32)
    ;; pages needed for [4096, 4096+size), rounded up
    (local.set $need
      (i32.shr_u
        (i32.add (i32.add (global.get $buffer) (local.get $size)) (i32.const 65535))
        (i32.const 16)))
    (if (i32.gt_u (local.get $need) (memory.size))
      (then
        (if (i32.eq (memory.grow (i32.sub (local.get $need) (memory.size))) (i32.const -1))
          (then (return (i32.const 0))))))
    (global.get $buffer))

  ;; ledge_init(kind, ptr, len): parameters are
  ;;   count u32 | (keyLen u32 | key | valueLen u32 | value) x count
  (func (export "ledge_init") (param $kind i32) (param $ptr i32) (param $len i32) (result i32)
    (local $n i32) (local $p i32) (local $klen i32) (local $vlen i32)
    (if (i32.ne (local.get $kind) (i32.const 1))
      (then
        (call $error (i32.const 1104) (i32.const 28))
        (return (i32.const -1))))
    (local.set $n (i32.load (local.get $ptr)))
    (local.set $p (i32.add (local.get $ptr) (i32.const 4)))
    (block $done
      (loop $next
        (br_if $done (i32.eqz (local.get $n)))
        (local.set $klen (i32.load (local.get $p)))
        (local.set $vlen (i32.load (i32.add (i32.add (local.get $p) (i32.const 4)) (local.get $klen))))
        (if (call $equal (i32.add (local.get $p) (i32.const 4)) (local.get $klen) (i32.const 1024) (i32.const 6))
          (then
            (if (i32.gt_u (local.get $vlen) (i32.const 1024))
              (then
                (call $error (i32.const 1072) (i32.const 29))
                (return (i32.const -1))))
            ;; copy the value to [0, vlen)
            (memory.copy (i32.const 0)
              (i32.add (i32.add (local.get $p) (i32.const 8)) (local.get $klen))
              (local.get $vlen))
            (global.set $prefix_len (local.get $vlen))
            (call $log (i32.const 1) (i32.const 1136) (i32.const 19))
            (return (i32.const 0))))
        (local.set $p (i32.add (local.get $p) (i32.add (i32.const 8) (i32.add (local.get $klen) (local.get $vlen)))))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $next)))
    (call $error (i32.const 1040) (i32.const 26))
    (i32.const -1))

  ;; equal(a, alen, b, blen) -> 1 when the byte strings are equal
  (func $equal (param $a i32) (param $alen i32) (param $b i32) (param $blen i32) (result i32)
    (if (i32.ne (local.get $alen) (local.get $blen)) (then (return (i32.const 0))))
    (call $has_prefix (local.get $a) (local.get $b) (local.get $blen)))

  ;; has_prefix(a, b, n) -> 1 when the n bytes at a equal the n bytes at b
  (func $has_prefix (param $a i32) (param $b i32) (param $n i32) (result i32)
    (block $differ
      (loop $byte
        (if (i32.eqz (local.get $n)) (then (return (i32.const 1))))
        (br_if $differ (i32.ne (i32.load8_u (local.get $a)) (i32.load8_u (local.get $b))))
        (local.set $a (i32.add (local.get $a) (i32.const 1)))
        (local.set $b (i32.add (local.get $b) (i32.const 1)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $byte)))
    (i32.const 0))

  ;; ledge_filter(ptr, len): keep record i when its value starts with the
  ;; prefix; answer with a bitmap of (count+7)/8 bytes in the answer area.
  (func (export "ledge_filter") (param $ptr i32) (param $len i32) (result i32)
    (local $count i32) (local $i i32) (local $entry i32) (local $vlen i32)
    (local $answer i32) (local $byte i32)
    (local.set $count (i32.load offset=12 (local.get $ptr)))
    (local.set $entry (i32.add (local.get $ptr) (i32.load offset=44 (local.get $ptr))))
    (local.set $answer (i32.add (local.get $ptr) (i32.load offset=56 (local.get $ptr))))
    (block $done
      (loop $record
        (br_if $done (i32.ge_u (local.get $i) (local.get $count)))
        (local.set $vlen (i32.load offset=28 (local.get $entry)))   ;; -1 = null
        (if (i32.and
              (i32.ge_s (local.get $vlen) (global.get $prefix_len))
              (call $has_prefix
                (i32.add (local.get $ptr) (i32.load offset=24 (local.get $entry)))
                (i32.const 0)
                (global.get $prefix_len)))
          (then
            (local.set $byte (i32.add (local.get $answer) (i32.shr_u (local.get $i) (i32.const 3))))
            (i32.store8 (local.get $byte)
              (i32.or (i32.load8_u (local.get $byte))
                      (i32.shl (i32.const 1) (i32.and (local.get $i) (i32.const 7)))))))
        (local.set $entry (i32.add (local.get $entry) (i32.const 40)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $record)))
    (i32.shr_u (i32.add (local.get $count) (i32.const 7)) (i32.const 3)))
)
