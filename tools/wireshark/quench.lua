-- quench's Wireshark / tshark dissector for what Wireshark 4.0 does not decode in quench's
-- frames:
--   CN-TAG, EtherType 0x22E9: Flow ID (RPID, 2 octets), then the EtherType of what follows;
--   CNM,    EtherType 0x22E7: the 24-octet header and up to 64 octets of the sampled frame;
--   the RoCEv2 CNP, BTH opcode 0x81 on UDP port 4791: its BTH's FECN/BECN bits, the 16
--           reserved octets and the ICRC (Wireshark's InfiniBand dissector still shows the BTH,
--           with the opcode as "Unknown (129)" and the two bits inside "Reserved");
--   quench's test header, 28 octets at the start of a test frame's payload (UDP port 50101,
--           or a RoCEv2 SEND's payload): magic "QNCH", version, clock, flow, sequence, time;
--   quench's INT header after it (magic "QINT"): the hops HPCC's switches stamped (line rate,
--           time, bytes, queue length each, as ns-3's IntHop packs them) or PINT's code;
--   quench's ACK (magic "QACK", from UDP port 50101): flow, sequence, echoed time, ECN echo,
--           and the INT header echoed.
-- The layouts are those of engine/wire/src/cntag.rs, cnm.rs (reference/protocols.md, IEEE
-- 802.1Q-2022 clause 33.4), roce.rs (IBTA vol. 1 annex A17), testhdr.rs, int.rs and ack.rs.
--
-- Use:  tshark -X lua_script:tools/wireshark/quench.lua -r capture.pcap
--       wireshark -X lua_script:tools/wireshark/quench.lua capture.pcap
-- or copy this file to ~/.local/lib/wireshark/plugins/ to load it every time.
--
-- Filter names: cntag.*, cnm.*, cnp.*, qnch.*, qint.*, qack.* (e.g. `cnm.qntzfb > 30`,
-- `cntag.rpid == 7`, `cnp.becn == 1`, `qnch.flow == 3 && qnch.seq > 100`, `qint.nhop == 2`). A
-- CNM shorter than its header, or whose MSDU length is over 64 or runs past the frame, a CNP
-- shorter than its 32 octets, and a test, INT or ACK header cut short are flagged malformed.

local CNTAG_ETHERTYPE = 0x22E9
local CNM_ETHERTYPE = 0x22E7
local CNM_HEADER_LEN = 24 -- octets up to and including the encapsulated MSDU length
local CNM_MAX_MSDU = 64   -- "Encapsulated MSDU (first bytes of the sampled frame) | 0-64"
-- quench's choices where the standard's text is not at hand (wire/cnm.rs, marked U there):
local QUEUE_UNIT = 64     -- octets per unit of cnmQOffset / cnmQDelta
-- CPID = the congestion point's MAC (octets 0-5), then its queue id (octets 6-7).

------------------------------------------------------------------------------------------------
-- CN-TAG
local p_cntag = Proto("cntag", "IEEE 802.1Qau Congestion Notification Tag")
local tag = {
  rpid  = ProtoField.uint16("cntag.rpid", "Flow ID (RPID)", base.HEX_DEC),
  etype = ProtoField.uint16("cntag.etype", "EtherType", base.HEX),
}
p_cntag.fields = { tag.rpid, tag.etype }
local e_tag_short = ProtoExpert.new("cntag.short", "CN-TAG shorter than 4 octets",
                                    expert.group.MALFORMED, expert.severity.ERROR)
p_cntag.experts = { e_tag_short }

local ethertype_table = DissectorTable.get("ethertype")

function p_cntag.dissector(tvb, pinfo, tree)
  local t = tree:add(p_cntag, tvb(0, math.min(4, tvb:len())))
  if tvb:len() < 4 then
    t:add_proto_expert_info(e_tag_short)
    return tvb:len()
  end
  local rpid = tvb(0, 2):uint()
  local next_type = tvb(2, 2):uint()
  t:add(tag.rpid, tvb(0, 2))
  t:add(tag.etype, tvb(2, 2))
  t:append_text(string.format(", RPID: %d", rpid))
  if tvb:len() > 4 then
    ethertype_table:try(next_type, tvb(4):tvb(), pinfo, tree)
  end
  return tvb:len()
end

------------------------------------------------------------------------------------------------
-- CNM
local p_cnm = Proto("cnm", "IEEE 802.1Qau Congestion Notification Message")
local cnm = {
  version    = ProtoField.uint16("cnm.version", "Version", base.DEC, nil, 0xF000),
  reservedv  = ProtoField.uint16("cnm.reservedv", "ReservedV", base.HEX, nil, 0x0FC0),
  qntzfb     = ProtoField.uint16("cnm.qntzfb", "Quantized feedback (QntzFb)", base.DEC, nil,
                                 0x003F),
  cpid       = ProtoField.bytes("cnm.cpid", "Congestion point ID (CPID)"),
  cpid_mac   = ProtoField.ether("cnm.cpid.mac", "CP MAC (quench's CPID layout)"),
  cpid_queue = ProtoField.uint16("cnm.cpid.queue", "CP queue (quench's CPID layout)"),
  qoffset    = ProtoField.int16("cnm.qoffset", "cnmQOffset"),
  qdelta     = ProtoField.int16("cnm.qdelta", "cnmQDelta"),
  prio       = ProtoField.uint16("cnm.encap_prio", "Encapsulated priority", base.HEX),
  pcp        = ProtoField.uint16("cnm.encap_pcp", "Encapsulated priority code point", base.DEC,
                                 nil, 0xE000),
  da         = ProtoField.ether("cnm.encap_da", "Encapsulated MAC DA"),
  len        = ProtoField.uint16("cnm.encap_len", "Encapsulated MSDU length"),
  msdu       = ProtoField.bytes("cnm.encap_msdu", "Encapsulated MSDU"),
}
p_cnm.fields = {
  cnm.version, cnm.reservedv, cnm.qntzfb, cnm.cpid, cnm.cpid_mac, cnm.cpid_queue, cnm.qoffset,
  cnm.qdelta, cnm.prio, cnm.pcp, cnm.da, cnm.len, cnm.msdu,
}
local e_short = ProtoExpert.new("cnm.short", "CNM shorter than its 24-octet header",
                                expert.group.MALFORMED, expert.severity.ERROR)
local e_msdu = ProtoExpert.new("cnm.msdu_len", "Encapsulated MSDU length invalid",
                               expert.group.MALFORMED, expert.severity.ERROR)
local e_version = ProtoExpert.new("cnm.version.unknown", "CNM version other than 0",
                                  expert.group.PROTOCOL, expert.severity.WARN)
p_cnm.experts = { e_short, e_msdu, e_version }

function p_cnm.dissector(tvb, pinfo, tree)
  pinfo.cols.protocol = "CNM"
  local n = tvb:len()
  local t = tree:add(p_cnm, tvb())
  if n < CNM_HEADER_LEN then
    t:add_proto_expert_info(e_short, string.format("CNM of %d octets, header is %d", n,
                                                   CNM_HEADER_LEN))
    return n
  end
  local word = tvb(0, 2):uint()
  local version = bit.rshift(word, 12)
  local fb = bit.band(word, 0x3F)
  local v = t:add(cnm.version, tvb(0, 2))
  if version ~= 0 then v:add_proto_expert_info(e_version) end
  t:add(cnm.reservedv, tvb(0, 2))
  t:add(cnm.qntzfb, tvb(0, 2))
  local c = t:add(cnm.cpid, tvb(2, 8))
  c:add(cnm.cpid_mac, tvb(2, 6))
  c:add(cnm.cpid_queue, tvb(8, 2))
  local qoff = tvb(10, 2):int()
  local qdel = tvb(12, 2):int()
  t:add(cnm.qoffset, tvb(10, 2)):append_text(string.format(" (%d octets)", qoff * QUEUE_UNIT))
  t:add(cnm.qdelta, tvb(12, 2)):append_text(string.format(" (%d octets)", qdel * QUEUE_UNIT))
  t:add(cnm.prio, tvb(14, 2))
  t:add(cnm.pcp, tvb(14, 2))
  t:add(cnm.da, tvb(16, 6))
  local msdu_len = tvb(22, 2):uint()
  local l = t:add(cnm.len, tvb(22, 2))
  if msdu_len > CNM_MAX_MSDU or CNM_HEADER_LEN + msdu_len > n then
    l:add_proto_expert_info(e_msdu, string.format("MSDU length %d: at most %d and within the "
                                                  .. "%d octets left", msdu_len, CNM_MAX_MSDU,
                                                  n - CNM_HEADER_LEN))
  elseif msdu_len > 0 then
    t:add(cnm.msdu, tvb(CNM_HEADER_LEN, msdu_len))
  end
  pinfo.cols.info = string.format("CNM QntzFb=%d qOffset=%d qDelta=%d CPID %s",
                                  fb, qoff, qdel, tostring(tvb(2, 8):bytes()))
  return n
end

ethertype_table:add(CNTAG_ETHERTYPE, p_cntag)
ethertype_table:add(CNM_ETHERTYPE, p_cnm)

------------------------------------------------------------------------------------------------
-- RoCEv2 CNP (roce.rs: "BTH (12 octets) / 16 zero octets / ICRC (4)"; BTH "opcode 0x81, ...,
-- octet 4 = 0x40 (BECN=1), DestQP = the sender's QP")
local CNP_OPCODE = 0x81
local CNP_LEN = 12 + 16 + 4
local ROCE_UDP_PORT = 4791
local p_cnp = Proto("cnp", "RoCEv2 Congestion Notification Packet")
local cnp = {
  fecn     = ProtoField.uint8("cnp.fecn", "FECN", base.DEC, nil, 0x80),
  becn     = ProtoField.uint8("cnp.becn", "BECN", base.DEC, nil, 0x40),
  destqp   = ProtoField.uint24("cnp.destqp", "Destination QP (the notified sender's)", base.HEX),
  reserved = ProtoField.bytes("cnp.reserved", "Reserved (16 octets)"),
  icrc     = ProtoField.uint32("cnp.icrc", "Invariant CRC", base.HEX),
}
p_cnp.fields = { cnp.fecn, cnp.becn, cnp.destqp, cnp.reserved, cnp.icrc }
local e_cnp_short = ProtoExpert.new("cnp.short", "CNP shorter than its 32 octets",
                                    expert.group.MALFORMED, expert.severity.ERROR)
local e_cnp_becn = ProtoExpert.new("cnp.becn.unset", "CNP without BECN",
                                   expert.group.PROTOCOL, expert.severity.WARN)
local e_cnp_resv = ProtoExpert.new("cnp.reserved.nonzero", "CNP reserved octets not zero",
                                   expert.group.PROTOCOL, expert.severity.WARN)
p_cnp.experts = { e_cnp_short, e_cnp_becn, e_cnp_resv }

local udp_port_table = DissectorTable.get("udp.port")
-- Wireshark's own RoCEv2 dissector: every frame on the port goes to it first, so its
-- infiniband.* fields stay; a CNP then gets the tree below.
local infiniband = udp_port_table:get_dissector(ROCE_UDP_PORT)

function p_cnp.dissector(tvb, pinfo, tree)
  local used = 0
  if infiniband then used = infiniband:call(tvb, pinfo, tree) end
  if tvb:len() < 1 or tvb(0, 1):uint() ~= CNP_OPCODE then return used end
  local n = tvb:len()
  local t = tree:add(p_cnp, tvb())
  if n < CNP_LEN then
    t:add_proto_expert_info(e_cnp_short, string.format("CNP of %d octets, %d expected", n,
                                                       CNP_LEN))
    return n
  end
  t:add(cnp.fecn, tvb(4, 1))
  local b = t:add(cnp.becn, tvb(4, 1))
  local becn = bit.band(tvb(4, 1):uint(), 0x40) ~= 0
  if not becn then b:add_proto_expert_info(e_cnp_becn) end
  t:add(cnp.destqp, tvb(5, 3))
  local r = t:add(cnp.reserved, tvb(12, 16))
  for i = 12, 27 do
    if tvb(i, 1):uint() ~= 0 then
      r:add_proto_expert_info(e_cnp_resv)
      break
    end
  end
  -- Shown as Wireshark shows the ICRC of other RoCEv2 frames (the four octets in wire order).
  t:add(cnp.icrc, tvb(28, 4))
  pinfo.cols.protocol = "RoCE CNP"
  pinfo.cols.info = string.format("CNP to QP 0x%06x%s", tvb(5, 3):uint(),
                                  becn and ", BECN" or "")
  return n
end

udp_port_table:add(ROCE_UDP_PORT, p_cnp)

------------------------------------------------------------------------------------------------
-- quench's test header (testhdr.rs)
local QNCH_MAGIC = 0x514E4348 -- "QNCH"
local QNCH_LEN = 28
local QNCH_UDP_PORT = 50101
local p_qnch = Proto("qnch", "quench test header")
local qnch = {
  magic   = ProtoField.uint32("qnch.magic", "Magic", base.HEX),
  version = ProtoField.uint8("qnch.version", "Version"),
  clock   = ProtoField.uint24("qnch.clock", "Clock domain (0: not said)", base.HEX),
  flow    = ProtoField.uint32("qnch.flow", "Flow ID"),
  seq     = ProtoField.uint64("qnch.seq", "Sequence number"),
  tx_ns   = ProtoField.uint64("qnch.tx_ns", "Transmit time (ns, the sender's clock)"),
  filler  = ProtoField.bytes("qnch.filler", "Filler"),
}
p_qnch.fields = { qnch.magic, qnch.version, qnch.clock, qnch.flow, qnch.seq, qnch.tx_ns,
                  qnch.filler }
local e_qnch_short = ProtoExpert.new("qnch.short", "Test header shorter than 28 octets",
                                     expert.group.MALFORMED, expert.severity.ERROR)
local e_qnch_version = ProtoExpert.new("qnch.version.unknown", "Test header version other than 1",
                                       expert.group.PROTOCOL, expert.severity.WARN)
p_qnch.experts = { e_qnch_short, e_qnch_version }

------------------------------------------------------------------------------------------------
-- quench's own headers (testhdr.rs, int.rs, ack.rs) start with a 4-octet magic.

-- The tree of `proto`'s header of `len` octets at the start of `tvb`, with its magic field:
-- nil when `tvb` does not start with `magic`; then whether the header is whole (one cut short
-- is flagged with `e_short`).
local function header_start(tvb, tree, proto, magic_field, magic, len, e_short)
  local n = tvb:len()
  if n < 4 or tvb(0, 4):uint() ~= magic then return nil, false end
  local t = tree:add(proto, tvb(0, math.min(n, len)))
  t:add(magic_field, tvb(0, 4))
  if n < len then
    t:add_proto_expert_info(e_short, string.format("%d octets of %d", n, len))
    return t, false
  end
  return t, true
end

------------------------------------------------------------------------------------------------
-- quench's INT header (int.rs), after the test header: ns-3 HPCC's IntHeader
local QINT_MAGIC = 0x51494E54 -- "QINT"
local QINT_FIXED = 8
local QINT_MAX_HOPS = 5
local QINT_LEN = { [0] = QINT_FIXED + 8 * QINT_MAX_HOPS, [1] = QINT_FIXED + 2 }
-- IntHop::lineRateValues, by the 3-bit code.
local QINT_RATES = { [0] = "25G", "50G", "100G", "200G", "400G", "?", "?", "?" }
local p_qint = Proto("qint", "quench INT (HPCC in-band telemetry)")
local qint = {
  magic   = ProtoField.uint32("qint.magic", "Magic", base.HEX),
  version = ProtoField.uint8("qint.version", "Version"),
  mode    = ProtoField.uint8("qint.mode", "Mode", base.DEC,
                             { [0] = "hops (HPCC)", [1] = "PINT (HPCC-PINT)" }),
  nhop    = ProtoField.uint16("qint.nhop", "Hops stamped"),
  hop     = ProtoField.uint64("qint.hop", "Hop word", base.HEX),
  rate    = ProtoField.string("qint.hop.rate", "Line rate"),
  time    = ProtoField.uint32("qint.hop.time", "Time (ns, mod 2^24)"),
  bytes   = ProtoField.uint32("qint.hop.bytes", "Bytes sent (units of 128 x INT_MULTI)"),
  qlen    = ProtoField.uint32("qint.hop.qlen", "Queue length (units of 80 x INT_MULTI)"),
  power   = ProtoField.uint16("qint.power", "PINT utilisation code"),
}
p_qint.fields = { qint.magic, qint.version, qint.mode, qint.nhop, qint.hop, qint.rate, qint.time,
                  qint.bytes, qint.qlen, qint.power }
local e_qint_short = ProtoExpert.new("qint.short", "INT header shorter than its mode's length",
                                     expert.group.MALFORMED, expert.severity.ERROR)
local e_qint_mode = ProtoExpert.new("qint.mode.unknown", "INT header of an unknown version or mode",
                                    expert.group.PROTOCOL, expert.severity.WARN)
p_qint.experts = { e_qint_short, e_qint_mode }

-- Bits [lo, lo + n) of the hop word whose low 32 bits are `lo32` and high 32 bits `hi32`.
local function hop_field(lo32, hi32, lo, n)
  local w = UInt64(lo32, hi32)
  return w:rshift(lo):band(UInt64((2 ^ n) - 1)):tonumber()
end

-- Dissects an INT header at the start of `tvb`: the octets used, 0 when it is none.
local function dissect_qint(tvb, pinfo, tree)
  local n = tvb:len()
  local t, whole = header_start(tvb, tree, p_qint, qint.magic, QINT_MAGIC, QINT_FIXED, e_qint_short)
  if t == nil then return 0 end
  if not whole then return n end
  t:add(qint.version, tvb(4, 1))
  t:add(qint.mode, tvb(5, 1))
  t:add(qint.nhop, tvb(6, 2))
  local mode, nhop = tvb(5, 1):uint(), tvb(6, 2):uint()
  local len = QINT_LEN[mode]
  if tvb(4, 1):uint() ~= 1 or len == nil then
    t:add_proto_expert_info(e_qint_mode)
    return QINT_FIXED
  end
  if n < len then
    t:add_proto_expert_info(e_qint_short, string.format("%d octets of %d", n, len))
    return n
  end
  t:set_len(len)
  if mode == 0 then
    for i = 0, math.min(nhop, QINT_MAX_HOPS) - 1 do
      local at = QINT_FIXED + 8 * i
      -- IntHeader::Serialize: the word's low 32 bits first, each half big-endian.
      local lo32, hi32 = tvb(at, 4):uint(), tvb(at + 4, 4):uint()
      local h = t:add(qint.hop, tvb(at, 8), UInt64(lo32, hi32))
      h:add(qint.rate, tvb(at, 8), QINT_RATES[hop_field(lo32, hi32, 0, 3)])
      h:add(qint.time, tvb(at, 8), hop_field(lo32, hi32, 3, 24))
      h:add(qint.bytes, tvb(at, 8), hop_field(lo32, hi32, 27, 20))
      h:add(qint.qlen, tvb(at, 8), hop_field(lo32, hi32, 47, 17))
    end
    t:append_text(string.format(", %d hop(s)", nhop))
  else
    t:add(qint.power, tvb(QINT_FIXED, 2))
    t:append_text(string.format(", PINT code %d", tvb(QINT_FIXED, 2):uint()))
  end
  pinfo.cols.info:append(string.format(" [INT %d hop(s)]", nhop))
  return len
end

-- Dissects a test header at the start of `tvb`: the octets used, 0 when it is none.
local function dissect_qnch(tvb, pinfo, tree)
  local n = tvb:len()
  local t, whole = header_start(tvb, tree, p_qnch, qnch.magic, QNCH_MAGIC, QNCH_LEN, e_qnch_short)
  if t == nil then return 0 end
  if not whole then return n end
  local v = t:add(qnch.version, tvb(4, 1))
  if tvb(4, 1):uint() ~= 1 then v:add_proto_expert_info(e_qnch_version) end
  t:add(qnch.clock, tvb(5, 3))
  t:add(qnch.flow, tvb(8, 4))
  t:add(qnch.seq, tvb(12, 8))
  t:add(qnch.tx_ns, tvb(20, 8))
  local at = QNCH_LEN
  if n > QNCH_LEN then at = at + dissect_qint(tvb(QNCH_LEN), pinfo, tree) end
  if n > at then t:add(qnch.filler, tvb(at)) end
  t:append_text(string.format(", flow %d, seq %s", tvb(8, 4):uint(),
                              tostring(tvb(12, 8):uint64())))
  pinfo.cols.info:append(string.format(" [quench flow %d seq %s]", tvb(8, 4):uint(),
                                       tostring(tvb(12, 8):uint64())))
  return n
end

------------------------------------------------------------------------------------------------
-- quench's ACK (ack.rs), from UDP port 50101: ns-3 HPCC's qbbHeader ACK
local QACK_MAGIC = 0x5141434B -- "QACK"
local QACK_LEN = 28
local p_qack = Proto("qack", "quench ACK")
local qack = {
  magic   = ProtoField.uint32("qack.magic", "Magic", base.HEX),
  version = ProtoField.uint8("qack.version", "Version"),
  ece     = ProtoField.bool("qack.ece", "ECN echo (CE)", 8, nil, 0x01),
  flow    = ProtoField.uint32("qack.flow", "Flow ID"),
  seq     = ProtoField.uint64("qack.seq", "Acknowledged sequence number"),
  tx_ns   = ProtoField.uint64("qack.tx_ns", "Echoed transmit time (ns)"),
}
p_qack.fields = { qack.magic, qack.version, qack.ece, qack.flow, qack.seq, qack.tx_ns }
local e_qack_short = ProtoExpert.new("qack.short", "ACK shorter than 28 octets",
                                     expert.group.MALFORMED, expert.severity.ERROR)
p_qack.experts = { e_qack_short }

local function dissect_qack(tvb, pinfo, tree)
  local n = tvb:len()
  local t, whole = header_start(tvb, tree, p_qack, qack.magic, QACK_MAGIC, QACK_LEN, e_qack_short)
  if t == nil then return 0 end
  if not whole then return n end
  t:add(qack.version, tvb(4, 1))
  t:add(qack.ece, tvb(5, 1))
  t:add(qack.flow, tvb(8, 4))
  t:add(qack.seq, tvb(12, 8))
  t:add(qack.tx_ns, tvb(20, 8))
  pinfo.cols.protocol = "QACK"
  pinfo.cols.info:append(string.format(" [quench ACK flow %d]", tvb(8, 4):uint()))
  if n > QACK_LEN then dissect_qint(tvb(QACK_LEN), pinfo, tree) end
  return n
end

function p_qnch.dissector(tvb, pinfo, tree)
  local used = dissect_qnch(tvb, pinfo, tree)
  if used == 0 then return dissect_qack(tvb, pinfo, tree) end
  pinfo.cols.protocol = "QNCH"
  return used
end

udp_port_table:add(QNCH_UDP_PORT, p_qnch)
-- A RoCEv2 SEND's payload (after the BTH, the ICRC taken off by the InfiniBand dissector).
p_qnch:register_heuristic("infiniband.payload", function(tvb, pinfo, tree)
  return dissect_qnch(tvb, pinfo, tree) > 0
end)
