// KafkaJS against Sluice's secure listeners: the driver
// (interop/driver/security.go) gives the single broker a SASL_SSL listener
// (SCRAM-SHA-512) and an SSL listener that requires client certificates,
// and passes SLUICE_SASL_SSL_BOOTSTRAP, SLUICE_MTLS_BOOTSTRAP and
// SLUICE_TLS_DIR. KafkaJS has no SCRAM admin API, so the user is made with
// Kafka's kafka-configs, as a KafkaJS user would; records go over both
// listeners through KafkaJS's producer and a consumer group. A wrong
// password, a missing certificate and a deleted user must get the right
// error and no record. Prints the result lines interop/driver reads.
'use strict'

const fs = require('fs')
const path = require('path')
const { execFileSync } = require('child_process')
const { Kafka, logLevel } = require('kafkajs')
const kafkajsVersion = require('kafkajs/package.json').version

const PLAIN = process.env.SLUICE_BOOTSTRAP || '127.0.0.1:9092'
const SASL_SSL = process.env.SLUICE_SASL_SSL_BOOTSTRAP
const MTLS = process.env.SLUICE_MTLS_BOOTSTRAP
const TLS_DIR = process.env.SLUICE_TLS_DIR || ''
const NAME = 'kafkajs'
const USER = `${NAME}-user`
const PASSWORD = `${NAME}-secret`
const RECORDS = 50
const PARTITIONS = 3
const ITERATIONS = 8192
// How long a refused client is given to deliver anything (or say why not).
const REFUSED_WAIT_MS = 15000
const JAVA_CP = [path.join(__dirname, '..', 'java', 'target', 'classes'),
  path.join(__dirname, '..', 'java', 'target', 'deps', '*')].join(':')

let failed = false
const oneLine = (s) => String(s).split(/\s+/).filter(Boolean).join(' ')
const report = (verdict, cap, detail) => {
  if (verdict === 'fail') failed = true
  process.stdout.write(`##interop ${verdict} ${cap} ${oneLine(detail)}\n`)
}
async function check (cap, fn) {
  try {
    report('pass', cap, await fn())
  } catch (e) {
    console.error(e)
    report('fail', cap, `${e.name}: ${e.message}`)
  }
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

function client (brokers, { sasl, withCert } = {}) {
  const ssl = { ca: [fs.readFileSync(path.join(TLS_DIR, 'ca.pem'))] }
  if (withCert) {
    const pem = fs.readFileSync(path.join(TLS_DIR, 'client.pem')) // key, certificate and CA
    ssl.key = pem
    ssl.cert = pem
  }
  return new Kafka({
    clientId: 'sluice-interop-kafkajs-security',
    brokers: [brokers],
    ssl,
    sasl,
    connectionTimeout: 5000,
    logLevel: process.env.INTEROP_DEBUG ? logLevel.DEBUG : logLevel.NOTHING,
    retry: { retries: 2, initialRetryTime: 200 },
  })
}

const scram = (password) => client(SASL_SSL, { sasl: { mechanism: 'scram-sha-512', username: USER, password } })

// roundTrip creates topic through kafka, produces RECORDS with acks=all and
// consumes them in a consumer group, exactly.
async function roundTrip (kafka, topic) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS }], waitForLeaders: true })
    const md = await admin.fetchTopicMetadata({ topics: [topic] })
    if (md.topics[0].partitions.length !== PARTITIONS) {
      throw new Error(`metadata of ${topic}: ${md.topics[0].partitions.length} partitions`)
    }
  } finally {
    await admin.disconnect()
  }
  const sent = Array.from({ length: RECORDS }, (_, i) =>
    ({ key: `key-${String(i % 13).padStart(2, '0')}`, value: `${topic}-${String(i).padStart(5, '0')}` }))
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  try {
    await producer.send({ topic, acks: -1, messages: sent })
  } finally {
    await producer.disconnect()
  }
  const got = []
  const consumer = kafka.consumer({ groupId: `${topic}-group`, maxWaitTimeInMs: 200 })
  await consumer.connect()
  try {
    await consumer.subscribe({ topic, fromBeginning: true })
    let done
    const all = new Promise((resolve) => { done = resolve })
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        got.push({ key: message.key.toString(), value: message.value.toString(), partition, offset: Number(message.offset) })
        if (got.length >= RECORDS) done()
      },
    })
    await Promise.race([all, sleep(30000)])
  } finally {
    await consumer.disconnect()
  }
  const want = new Map(sent.map((r) => [r.value, r.key]))
  const last = new Map()
  const keyPart = new Map()
  const problems = []
  for (const g of got) {
    if (want.get(g.value) !== g.key) problems.push(`unexpected record ${g.key}:${g.value}`)
    if (last.has(g.partition) && g.offset <= last.get(g.partition)) {
      problems.push(`partition ${g.partition}: offset ${g.offset} after ${last.get(g.partition)}`)
    }
    last.set(g.partition, g.offset)
    if (keyPart.has(g.key) && keyPart.get(g.key) !== g.partition) problems.push(`key ${g.key} in two partitions`)
    keyPart.set(g.key, g.partition)
  }
  const distinct = new Set(got.map((g) => g.value)).size
  if (got.length !== RECORDS || distinct !== RECORDS) {
    problems.push(`consumed ${got.length} records (${distinct} distinct), produced ${RECORDS}`)
  }
  if (problems.length) throw new Error(problems.slice(0, 5).join('; '))
  return `topic of ${PARTITIONS} partitions created, ${RECORDS} records produced (acks=all) and consumed in a group, exactly`
}

// attempt runs fn for at most REFUSED_WAIT_MS and returns the error it
// failed with (null if it succeeded, 'timeout' if it did neither).
async function attempt (fn) {
  let timer
  const timeout = new Promise((resolve) => { timer = setTimeout(() => resolve('timeout'), REFUSED_WAIT_MS) })
  try {
    return await Promise.race([fn().then(() => null, (e) => e), timeout])
  } finally {
    clearTimeout(timer)
  }
}

const authFailed = (e) => e && e.name === 'KafkaJSSASLAuthenticationError'
const describe = (e) => (e === 'timeout' ? `nothing within ${REFUSED_WAIT_MS / 1000}s` : `${e.name}: ${e.message}`)

// refused checks that a client with credentials the broker refuses can
// neither produce nor read a record, and is told why.
async function refused (kafka, topic) {
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  const perr = await attempt(async () => {
    await producer.connect()
    await producer.send({ topic, acks: -1, messages: [{ value: 'refused' }] })
  })
  await producer.disconnect().catch(() => {})
  if (perr === null) throw new Error('the producer was served')
  if (!authFailed(perr)) throw new Error(`the producer failed, but not with the SASL authentication error: ${describe(perr)}`)
  let got = 0
  const consumer = kafka.consumer({ groupId: `${topic}-refused`, maxWaitTimeInMs: 200 })
  const cerr = await attempt(async () => {
    await consumer.connect()
    await consumer.subscribe({ topic, fromBeginning: true })
    await consumer.run({ eachMessage: async () => { got++ } })
    await sleep(REFUSED_WAIT_MS)
  })
  await consumer.disconnect().catch(() => {})
  if (got) throw new Error(`the consumer read ${got} records`)
  if (!authFailed(cerr)) throw new Error(`the consumer read nothing, but was not told of the authentication failure: ${describe(cerr)}`)
  return `producer: ${describe(perr)}; consumer: no record, ${describe(cerr)}`
}

// expectRecords checks through the PLAINTEXT listener that topic holds
// exactly n records (the refused producer wrote none).
async function expectRecords (topic, n) {
  const admin = new Kafka({ brokers: PLAIN.split(','), logLevel: logLevel.NOTHING }).admin()
  await admin.connect()
  try {
    const offsets = await admin.fetchTopicOffsets(topic)
    const total = offsets.reduce((sum, o) => sum + Number(o.high) - Number(o.low), 0)
    if (total !== n) throw new Error(`${topic} holds ${total} records, want the ${n} produced with the right password`)
  } finally {
    await admin.disconnect()
  }
}

async function noCertificate (topic) {
  const kafka = client(MTLS, {})
  const admin = kafka.admin()
  const merr = await attempt(async () => {
    await admin.connect()
    await admin.fetchTopicMetadata({ topics: [topic] })
  })
  await admin.disconnect().catch(() => {})
  if (merr === null) throw new Error('a client without a certificate was served metadata')
  if (merr === 'timeout' || !/certificate/.test(merr.message)) {
    throw new Error(`refused, but the error does not name the certificate: ${describe(merr)}`)
  }
  let got = 0
  const consumer = kafka.consumer({ groupId: `${topic}-no-cert`, maxWaitTimeInMs: 200 })
  const cerr = await attempt(async () => {
    await consumer.connect()
    await consumer.subscribe({ topic, fromBeginning: true })
    await consumer.run({ eachMessage: async () => { got++ } })
    await sleep(REFUSED_WAIT_MS)
  })
  await consumer.disconnect().catch(() => {})
  if (got) throw new Error(`a client without a certificate read ${got} records`)
  return `metadata: ${describe(merr)}; consumer: no record (${describe(cerr)})`
}

function configs (...args) {
  return execFileSync('java', ['-XX:TieredStopAtLevel=1', '-Dorg.slf4j.simpleLogger.defaultLogLevel=warn',
    '-cp', JAVA_CP, 'org.apache.kafka.tools.ConfigCommand', '--bootstrap-server', PLAIN,
    '--entity-type', 'users', '--entity-name', USER, ...args],
  { stdio: ['ignore', 'pipe', 'inherit'], timeout: 90000 }).toString()
}

async function main () {
  process.stdout.write(`##interop version kafkajs ${kafkajsVersion}\n`)
  if (!SASL_SSL || !MTLS || !TLS_DIR) {
    report('fail', 'scram-user', 'the driver gave no secure listeners')
    return 1
  }
  await check('scram-user', async () => {
    configs('--alter', '--add-config', `SCRAM-SHA-512=[iterations=${ITERATIONS},password=${PASSWORD}]`)
    const out = configs('--describe')
    if (!out.includes(`SCRAM-SHA-512=iterations=${ITERATIONS}`)) throw new Error(`kafka-configs --describe: ${oneLine(out)}`)
    return `kafka-configs --add-config: ${USER} has SCRAM-SHA-512/${ITERATIONS}`
  })
  await check('sasl-ssl', () => roundTrip(scram(PASSWORD), `${NAME}-sasl-ssl`))
  await check('wrong-password', async () => {
    const detail = await refused(scram(`not-${PASSWORD}`), `${NAME}-sasl-ssl`)
    await expectRecords(`${NAME}-sasl-ssl`, RECORDS)
    return detail
  })
  await check('mtls', () => roundTrip(client(MTLS, { withCert: true }), `${NAME}-mtls`))
  await check('mtls-no-cert', () => noCertificate(`${NAME}-mtls`))
  await check('deleted-user', async () => {
    configs('--alter', '--delete-config', 'SCRAM-SHA-512')
    return `kafka-configs --delete-config; ${await refused(scram(PASSWORD), `${NAME}-sasl-ssl`)}`
  })
  return failed ? 1 : 0
}

main().then((code) => process.exit(code), (e) => {
  console.error(e)
  process.exit(1)
})
