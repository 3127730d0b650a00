// KafkaJS against Sluice: the same script as interop/go and interop/java,
// printing the result lines interop/driver reads. INTEROP_DEBUG=1 turns on
// KafkaJS's DEBUG log (every request and response) on stderr.
'use strict'

const {
  Kafka, logLevel, CompressionTypes, Partitioners, ConfigResourceTypes,
} = require('kafkajs')
const kafkajsVersion = require('kafkajs/package.json').version

const BOOTSTRAP = process.env.SLUICE_BOOTSTRAP || '127.0.0.1:9092'
const NAME = 'kafkajs'
const CODEC_PARTITIONS = 3
const GROUP_PARTITIONS = 4
const CODEC_RECORDS = 120
const GROUP_RECORDS = 100
const REJOIN_WAIT_MS = 4000
// KafkaJS ships gzip only; snappy, lz4 and zstd need third-party codec packages.
const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }

let failed = false
const oneLine = (s) => String(s).split(/\s+/).filter(Boolean).join(' ')
const report = (verdict, cap, detail) => {
  if (verdict === 'fail') failed = true
  process.stdout.write(`##interop ${verdict} ${cap} ${oneLine(detail)}\n`)
}
async function check (cap, fn) {
  try {
    report('pass', cap, await fn())
    return true
  } catch (e) {
    console.error(e)
    report('fail', cap, `${e.name}: ${e.message}${e.type ? ' (' + e.type + ')' : ''}`)
    return false
  }
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

const kafka = new Kafka({
  clientId: 'sluice-interop-kafkajs',
  brokers: BOOTSTRAP.split(','),
  logLevel: process.env.INTEROP_DEBUG ? logLevel.DEBUG : logLevel.ERROR,
  retry: { retries: 5 },
})

function makeRecords (tag, n, t0) {
  const payload = 'sluice interop payload '.repeat(8)
  const out = []
  for (let i = 0; i < n; i++) {
    out.push({
      key: `key-${String(i % 13).padStart(2, '0')}`,
      value: `${tag}-${String(i).padStart(5, '0')}|${payload}`,
      headers: [['seq', String(i)], ['tag', tag]],
      ts: t0 + i,
      partition: -1,
      offset: -1,
    })
  }
  return out
}
const idOf = (r) => r.value.split('|', 1)[0]

function fromMessage (partition, m) {
  return {
    key: m.key === null ? null : m.key.toString(),
    value: m.value.toString(),
    headers: Object.entries(m.headers || {}).map(([k, v]) => [k, Buffer.isBuffer(v) ? v.toString() : String(v)]),
    ts: Number(m.timestamp),
    partition,
    offset: Number(m.offset),
  }
}

function verifyExact (sent, got) {
  const byId = new Map(sent.map((r, i) => [idOf(r), [i, r]]))
  const seen = new Set()
  const last = new Map()
  const keyPart = new Map()
  const problems = []
  for (const g of got) {
    const id = idOf(g)
    const entry = byId.get(id)
    if (!entry) { problems.push(`unexpected record ${id} at ${g.partition}/${g.offset}`); continue }
    const [i, want] = entry
    if (seen.has(id)) problems.push(`record ${id} read twice`)
    seen.add(id)
    if (g.key !== want.key) problems.push(`record ${id}: key ${g.key}, want ${want.key}`)
    if (g.value !== want.value) problems.push(`record ${id}: value differs`)
    if (JSON.stringify(g.headers) !== JSON.stringify(want.headers)) {
      problems.push(`record ${id}: headers ${JSON.stringify(g.headers)}, want ${JSON.stringify(want.headers)}`)
    }
    if (g.ts !== want.ts) problems.push(`record ${id}: timestamp ${g.ts}, want ${want.ts}`)
    if (want.partition >= 0 && (g.partition !== want.partition || g.offset !== want.offset)) {
      problems.push(`record ${id} read at ${g.partition}/${g.offset}, producer was told ${want.partition}/${want.offset}`)
    }
    if (keyPart.has(g.key) && keyPart.get(g.key) !== g.partition) {
      problems.push(`key ${g.key} in partitions ${keyPart.get(g.key)} and ${g.partition}`)
    }
    keyPart.set(g.key, g.partition)
    if (last.has(g.partition) && i < last.get(g.partition)) {
      problems.push(`partition ${g.partition}: record ${id} read after a later-produced one`)
    }
    last.set(g.partition, i)
  }
  if (got.length !== sent.length || seen.size !== sent.length) {
    problems.push(`read ${got.length} records (${seen.size} distinct), produced ${sent.length}`)
  }
  if (problems.length) throw new Error(problems.slice(0, 5).join('; '))
}

// produce sends recs in one call with acks=all and fills in each record's
// partition and offset from the per-partition base offsets in the response.
async function produce (topic, codec, idempotent, recs) {
  const producer = kafka.producer({
    idempotent,
    maxInFlightRequests: idempotent ? 1 : undefined,
    createPartitioner: Partitioners.DefaultPartitioner,
    allowAutoTopicCreation: false,
  })
  await producer.connect()
  try {
    const res = await producer.send({
      topic,
      acks: -1,
      compression: CODECS[codec],
      messages: recs.map((r) => ({
        key: r.key, value: r.value, headers: Object.fromEntries(r.headers), timestamp: String(r.ts),
      })),
    })
    // The default partitioner is murmur2 over the key, as Java's; work out
    // each record's partition the same way to place it.
    const partitioner = Partitioners.DefaultPartitioner()
    const partitionMetadata = Array.from({ length: await partitionsOf(topic) },
      (_, i) => ({ partitionId: i, leader: 1 }))
    const base = new Map(res.map((m) => [m.partition, Number(m.baseOffset)]))
    const next = new Map()
    for (const r of recs) {
      const p = partitioner({ topic, partitionMetadata, message: { key: r.key, value: r.value } })
      const i = next.get(p) || 0
      next.set(p, i + 1)
      r.partition = p
      r.offset = base.get(p) + i
    }
  } finally {
    await producer.disconnect()
  }
}

let admin
async function partitionsOf (topic) {
  const md = await admin.fetchTopicMetadata({ topics: [topic] })
  return md.topics[0].partitions.length
}

async function consume (topic, n) {
  const consumer = kafka.consumer({ groupId: `${topic}-reader`, maxWaitTimeInMs: 200 })
  const out = []
  await consumer.connect()
  try {
    await consumer.subscribe({ topic, fromBeginning: true })
    let done
    const all = new Promise((resolve) => { done = resolve })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        out.push(fromMessage(partition, message))
        if (out.length >= n) done()
      },
    })
    await Promise.race([all, sleep(30000)])
    if (out.length < n) throw new Error(`consumed ${out.length} of ${n} records within 30s`)
    return out
  } finally {
    await consumer.disconnect()
  }
}

async function produceConsume (topic, codec, idempotent, t0) {
  const sent = makeRecords(topic, CODEC_RECORDS, t0)
  await produce(topic, codec, idempotent, sent)
  verifyExact(sent, await consume(topic, sent.length))
  return sent
}

// A group member: commits each message before reporting it.
// With tolerateRestart, a crash KafkaJS recovers from by restarting the
// consumer (restartOnFailure) is counted, not fatal.
async function startMember (group, topic, got, tolerateRestart = false) {
  const consumer = kafka.consumer({ groupId: group, maxWaitTimeInMs: 200, heartbeatInterval: 1000 })
  const m = { consumer, count: 0, error: null, restarts: [] }
  consumer.on(consumer.events.CRASH, (e) => {
    if (tolerateRestart && e.payload.restart) m.restarts.push(e.payload.error.message)
    else m.error = e.payload.error
  })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      await consumer.commitOffsets([{ topic, partition, offset: String(Number(message.offset) + 1) }])
      m.count++
      got(fromMessage(partition, message))
    },
  })
  return m
}

async function awaitPhase (counts, prefix, ...members) {
  const deadline = Date.now() + 90000
  for (;;) {
    const n = [...counts.keys()].filter((k) => k.startsWith(prefix)).length
    if (n === GROUP_RECORDS) return
    for (const m of members) if (m.error) throw new Error(`member failed: ${m.error}`)
    if (Date.now() > deadline) throw new Error(`only ${n} of ${GROUP_RECORDS} records of ${prefix} consumed within 90s`)
    await sleep(50)
  }
}

async function groupScenario (topic, group, t0) {
  const counts = new Map()
  const redelivered = []
  let phase = `${topic}-p1`
  const got = (r) => {
    const id = idOf(r)
    counts.set(id, (counts.get(id) || 0) + 1)
    if (!id.startsWith(phase)) redelivered.push(`${id} at ${r.partition}/${r.offset}`)
  }
  await produce(topic, 'none', false, makeRecords(`${topic}-p1`, GROUP_RECORDS, t0))
  const a = await startMember(group, topic, got)
  const b = await startMember(group, topic, got)
  try {
    await awaitPhase(counts, `${topic}-p1`, a, b)
    const split1 = `phase 1 split ${a.count}/${b.count}`
    const bBefore = b.count
    await a.consumer.disconnect()
    phase = `${topic}-p2`
    // Half of phase 2 before the restarted member joins, half once it has
    // had time to get partitions of its own.
    const p2 = makeRecords(`${topic}-p2`, GROUP_RECORDS, t0 + 1000)
    await produce(topic, 'none', false, p2.slice(0, GROUP_RECORDS / 2))
    const a2 = await startMember(group, topic, got)
    try {
      await sleep(REJOIN_WAIT_MS)
      await produce(topic, 'none', false, p2.slice(GROUP_RECORDS / 2))
      await awaitPhase(counts, `${topic}-p2`, a2, b)
      await sleep(500)
    } finally {
      await a2.consumer.disconnect()
    }
    if (redelivered.length) {
      throw new Error(`did not resume from the committed offsets: ${redelivered.length} phase-1 records delivered again after restart, e.g. ${redelivered[0]}`)
    }
    const dups = [...counts.values()].filter((n) => n > 1).length
    if (dups) throw new Error(`${dups} records delivered twice though every delivery was committed first`)
    return `${split1}; phase 2 split ${a2.count}/${b.count - bBefore} after restart`
  } finally {
    await b.consumer.disconnect()
  }
}

async function checkOffsets (topic, sent, t0) {
  const wantLatest = new Map()
  const byPart = new Map()
  for (const r of sent) {
    wantLatest.set(r.partition, Math.max(wantLatest.get(r.partition) || 0, r.offset + 1))
    if (!byPart.has(r.partition)) byPart.set(r.partition, [])
    byPart.get(r.partition).push(r)
  }
  const offs = await admin.fetchTopicOffsets(topic)
  for (const o of offs) {
    if (Number(o.low) !== 0) throw new Error(`partition ${o.partition}: earliest ${o.low}, want 0`)
    const want = wantLatest.get(o.partition) || 0
    if (Number(o.high) !== want) throw new Error(`partition ${o.partition}: latest ${o.high}, want ${want}`)
  }
  if (offs.length !== CODEC_PARTITIONS) throw new Error(`${offs.length} partitions listed`)
  for (const [p, rs] of byPart) {
    const mid = rs[Math.floor(rs.length / 2)]
    for (const [ts, want] of [[t0 - 3600000, rs[0].offset], [mid.ts, mid.offset]]) {
      const res = await admin.fetchTopicOffsetsByTimestamp(topic, ts)
      const got = Number(res.find((x) => x.partition === p).offset)
      if (got !== want) throw new Error(`partition ${p} by time ${ts}: offset ${got}, want ${want}`)
    }
  }
  return `fetchTopicOffsets (earliest, latest) and fetchTopicOffsetsByTimestamp of ${CODEC_PARTITIONS} partitions`
}

async function describeConfig (topic, key) {
  const res = await admin.describeConfigs({
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }], includeSynonyms: false,
  })
  const r = res.resources[0]
  if (r.errorCode) throw new Error(`DescribeConfigs error ${r.errorCode}: ${r.errorMessage}`)
  const e = r.configEntries.find((c) => c.configName === key)
  return e ? e.configValue : null
}

const TXN_PARTITIONS = 3
const TXN_RECORDS = 30

// transactions commits one transaction, aborts another and commits an END
// per partition; a read_committed consumer must read exactly the
// committed values.
async function transactions (topic) {
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: TXN_PARTITIONS, replicationFactor: 1 }] })
  const producer = kafka.producer({ transactionalId: `${topic}-id`, idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false })
  await producer.connect()
  const want = new Set()
  try {
    for (const [prefix, commit] of [['c', true], ['a', false]]) {
      const txn = await producer.transaction()
      const messages = []
      for (let i = 0; i < TXN_RECORDS; i++) {
        messages.push({ value: `${prefix}-${i}`, partition: i % TXN_PARTITIONS })
        if (commit) want.add(`${prefix}-${i}`)
      }
      await txn.send({ topic, acks: -1, messages })
      await (commit ? txn.commit() : txn.abort())
    }
    const txn = await producer.transaction()
    await txn.send({ topic, acks: -1, messages: [...Array(TXN_PARTITIONS).keys()].map((p) => ({ value: 'END', partition: p })) })
    await txn.commit()
  } finally {
    await producer.disconnect()
  }
  const consumer = kafka.consumer({ groupId: `${topic}-reader`, maxWaitTimeInMs: 200, readUncommitted: false })
  const got = []
  const ended = new Set()
  await consumer.connect()
  try {
    await consumer.subscribe({ topic, fromBeginning: true })
    let done
    const all = new Promise((resolve) => { done = resolve })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        const v = message.value.toString()
        if (v === 'END') ended.add(partition)
        else got.push(v)
        if (ended.size === TXN_PARTITIONS) done()
      },
    })
    await Promise.race([all, sleep(30000)])
  } finally {
    await consumer.disconnect()
  }
  const sorted = (xs) => [...xs].sort().join(',')
  if (ended.size < TXN_PARTITIONS || sorted(got) !== sorted(want)) {
    throw new Error(`read_committed read ${got.length} values (${ended.size} partitions ended), want the ${want.size} committed ones`)
  }
  return `${TXN_RECORDS} committed, ${TXN_RECORDS} aborted (unseen) over ${TXN_PARTITIONS} partitions; read_committed read exactly the committed ones`
}

async function main () {
  process.stdout.write(`##interop version kafkajs ${kafkajsVersion}\n`)
  admin = kafka.admin()
  await admin.connect()
  const t0 = Date.now() - 5 * 60 * 1000
  const topic = (s) => `${NAME}-${s}`
  const codecTopics = ['none', 'gzip', 'idempotent'].map((c) => topic(`codec-${c}`))
  const groupTopic = topic('group-eager')

  await check('create-topic', async () => {
    const created = await admin.createTopics({
      waitForLeaders: true,
      topics: [
        ...codecTopics.map((t) => ({ topic: t, numPartitions: CODEC_PARTITIONS, replicationFactor: 1 })),
        { topic: groupTopic, numPartitions: GROUP_PARTITIONS, replicationFactor: 1 },
      ],
    })
    if (!created) throw new Error('createTopics returned false (topics already existed)')
    for (const t of [...codecTopics, groupTopic]) {
      const n = await partitionsOf(t)
      const want = t === groupTopic ? GROUP_PARTITIONS : CODEC_PARTITIONS
      if (n !== want) throw new Error(`metadata of ${t}: ${n} partitions, created with ${want}`)
    }
    return `${codecTopics.length + 1} topics, metadata shows their partitions`
  })

  let noneSent = null
  for (const codec of Object.keys(CODECS)) {
    await check(`codec-${codec}`, async () => {
      const sent = await produceConsume(topic(`codec-${codec}`), codec, false, t0)
      if (codec === 'none') noneSent = sent
      return `${sent.length} records, acks=-1, compression ${codec}, read back exactly`
    })
  }
  for (const codec of ['snappy', 'lz4', 'zstd']) {
    report('skip', `codec-${codec}`, `kafkajs ships no ${codec} codec (it needs a third-party codec package)`)
  }
  await check('idempotence', async () => {
    const sent = await produceConsume(topic('codec-idempotent'), 'none', true, t0)
    return `${sent.length} records, idempotent producer, read back exactly`
  })
  // KafkaJS's assigners (round-robin by default) are all eager.
  await check('group-eager', () => groupScenario(groupTopic, `${NAME}-eager`, t0))
  report('skip', 'group-cooperative', 'kafkajs has no cooperative assignor (eager rebalancing only)')
  if (noneSent) {
    await check('list-offsets', () => checkOffsets(topic('codec-none'), noneSent, t0))
  } else {
    report('fail', 'list-offsets', 'not run: the uncompressed produce step failed')
  }
  await check('describe-config', async () => {
    const v = await describeConfig(topic('codec-none'), 'retention.ms')
    if (v === null) throw new Error('retention.ms missing from DescribeConfigs')
    return `retention.ms=${v}`
  })
  await check('alter-config', async () => {
    const v = '86400000'
    await admin.alterConfigs({
      validateOnly: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic('codec-none'), configEntries: [{ name: 'retention.ms', value: v }] }],
    })
    const got = await describeConfig(topic('codec-none'), 'retention.ms')
    if (got !== v) throw new Error(`after altering retention.ms to ${v}, DescribeConfigs says ${got}`)
    return `alterConfigs (AlterConfigs v0) retention.ms=${v} read back`
  })
  await check('transactions', () => transactions(topic('txn')))
  await admin.disconnect()
  return failed ? 1 : 0
}

// The cluster scenario (interop/driver's three-broker half) asks the driver
// to stop or start a broker on stdout and reads its one-line reply on stdin.
const driverLines = []
let driverWaiter = null
function askDriver (req) {
  if (driverWaiter === undefined) throw new Error('stdin closed: no driver')
  if (driverLines.length === 0 && driverWaiter === null) {
    require('readline').createInterface({ input: process.stdin })
      .on('line', (l) => { driverLines.push(l.trim()); if (driverWaiter) driverWaiter() })
  }
  process.stdout.write(`##interop broker ${req}\n`)
  return new Promise((resolve, reject) => {
    const take = () => {
      driverWaiter = () => {}
      const reply = driverLines.shift()
      if (reply.startsWith('error')) reject(new Error(`driver: ${reply}`))
      else resolve(reply)
    }
    if (driverLines.length > 0) take()
    else driverWaiter = take
  })
}

const CLUSTER_PARTITIONS = 3
const PER_PHASE = 100

// An RF=3 topic with min.insync.replicas=2, one group member consuming what
// an idempotent acks=all producer writes, before, while and after the driver
// restarts the group's coordinator (SIGTERM).
async function clusterMain () {
  process.stdout.write(`##interop version kafkajs ${kafkajsVersion}\n`)
  admin = kafka.admin()
  await admin.connect()
  const topic = `${NAME}-rf3`
  const group = `${NAME}-rf3-group`
  const ok = await check('rf3-topic', async () => {
    await admin.createTopics({
      waitForLeaders: true,
      topics: [{ topic, numPartitions: CLUSTER_PARTITIONS, replicationFactor: 3, configEntries: [{ name: 'min.insync.replicas', value: '2' }] }],
    })
    const deadline = Date.now() + 30000
    for (;;) {
      const parts = (await admin.fetchTopicMetadata({ topics: [topic] })).topics[0].partitions
      const same = (a, b) => a.length === b.length && a.every((x) => b.includes(x))
      if (parts.length === CLUSTER_PARTITIONS && parts.every((p) =>
        new Set(p.replicas).size === 3 && same(p.isr, p.replicas) && p.replicas.includes(p.leader))) {
        const p0 = parts.find((p) => p.partitionId === 0)
        return `${parts.length} partitions, replicas [${p0.replicas}], ISR [${p0.isr}], leaders on ${new Set(parts.map((p) => p.leader)).size} brokers`
      }
      if (Date.now() > deadline) throw new Error(`not three in-sync replicas per partition: ${JSON.stringify(parts)}`)
      await sleep(200)
    }
  })
  if (!ok) return 1
  const deliveries = []
  const member = await startMember(group, topic, (r) => deliveries.push([idOf(r), r.partition]), true)
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: Partitioners.DefaultPartitioner, allowAutoTopicCreation: false })
  await producer.connect()
  // KafkaJS's offset manager keeps committing to the coordinator it joined
  // through (reconnecting to that node id, never asking FindCoordinator
  // again); when that broker is gone, commits fail until the consumer's
  // retries run out and it restarts itself and rejoins (tens of seconds).
  const phase = async (tag, waitMs = 45000) => {
    const start = Date.now()
    const recs = makeRecords(`${topic}-${tag}`, PER_PHASE, Date.now())
    await producer.send({
      topic,
      acks: -1,
      messages: recs.map((r) => ({ key: r.key, value: r.value, headers: Object.fromEntries(r.headers), timestamp: String(r.ts) })),
    })
    const deadline = start + waitMs
    for (;;) {
      const n = deliveries.filter(([id]) => id.startsWith(`${topic}-${tag}-`)).length
      if (n >= PER_PHASE) return [PER_PHASE, ((Date.now() - start) / 1000).toFixed(1)]
      if (member.error) throw new Error(`member failed: ${member.error}`)
      if (Date.now() > deadline) throw new Error(`consumed ${n} of ${PER_PHASE} records of ${tag} within ${waitMs / 1000}s`)
      await sleep(50)
    }
  }
  try {
    if (!await check('acks-all', async () => `${(await phase('p1'))[0]} records, acks=-1, idempotent, consumed by the group member`)) return 1
    if (!await check('broker-down', async () => {
      const stopped = await askDriver(`stop ${group}`)
      const [n, secs] = await phase('p2', 100000)
      const restarted = member.restarts.length === 0 ? ''
        : `; the consumer restarted itself ${member.restarts.length} time(s) after "${member.restarts[0]}"`
      return `${stopped}: ${n} more records, acks=-1, idempotent, consumed by the same member within ${secs}s${restarted}`
    })) return 1
    await check('broker-back', async () => {
      const started = await askDriver('start')
      const [n] = await phase('p3')
      await sleep(500) // late duplicates
      const problems = []
      const seen = new Set()
      const last = new Map()
      for (const [id, p] of deliveries) {
        const rid = id.slice(topic.length + 1)
        if (seen.has(rid)) problems.push(`${rid} delivered twice`)
        seen.add(rid)
        if (last.has(p) && rid <= last.get(p)) problems.push(`partition ${p}: ${rid} after ${last.get(p)}`)
        last.set(p, rid)
      }
      if (deliveries.length !== 3 * PER_PHASE || seen.size !== 3 * PER_PHASE) {
        problems.push(`${deliveries.length} deliveries of ${seen.size} distinct records, produced ${3 * PER_PHASE}`)
      }
      if (problems.length > 0) throw new Error(problems.slice(0, 5).join('; '))
      return `${started}: ${n} more records; all ${3 * PER_PHASE} consumed exactly once, in produce order per partition`
    })
  } finally {
    await producer.disconnect()
    await member.consumer.disconnect()
    await admin.disconnect()
  }
  return failed ? 1 : 0
}

const entry = process.argv[2] === 'cluster' ? clusterMain : main
entry().then((code) => process.exit(code), (e) => {
  console.error(e)
  process.exit(1)
})
