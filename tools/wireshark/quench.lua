-- quench's Wireshark / tshark dissector for IEEE 802.1Qau congestion notification:
--   CN-TAG, EtherType 0x22E9: Flow ID (RPID, 2 octets), then the EtherType of what follows;
--   CNM,    EtherType 0x22E7: the 24-octet header and up to 64 octets of the sampled frame.
-- Wireshark 4.0 decodes neither. The layouts are those of engine/wire/src/cntag.rs and
-- engine/wire/src/cnm.rs (reference/protocols.md, IEEE 802.1Q-2022 clause 33.4).
--
-- Use:  tshark -X lua_script:tools/wireshark/quench.lua -r capture.pcap
--       wireshark -X lua_script:tools/wireshark/quench.lua capture.pcap
-- or copy this file to ~/.local/lib/wireshark/plugins/ to load it every time.
--
-- Filter names: cntag.*, cnm.* (e.g. `cnm.qntzfb > 30`, `cntag.rpid == 7`). A CNM shorter than
-- its header, or whose MSDU length is over 64 or runs past the frame, is flagged malformed.

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
