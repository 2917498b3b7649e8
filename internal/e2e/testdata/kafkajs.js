// A kafkajs producer and group consumer against a Ledge node's Kafka
// listener: node kafkajs.js BROKER TOKEN TOPIC GROUP COUNT. It produces
// COUNT records, consumes them in the group (committing each), and prints
// the values it read as one JSON line.
const { Kafka, logLevel } = require('kafkajs')

const [broker, token, topic, group, count] = process.argv.slice(2)
const n = Number(count)
const kafka = new Kafka({
  clientId: 'ledge-e2e',
  brokers: [broker],
  sasl: { mechanism: 'plain', username: 'kafkajs', password: token },
  logLevel: logLevel.ERROR,
})

async function main () {
  const producer = kafka.producer()
  await producer.connect()
  const messages = []
  for (let i = 0; i < n; i++) messages.push({ key: `k${i}`, value: `js-${i}` })
  await producer.send({ topic, messages })
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: group, heartbeatInterval: 100 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const seen = []
  await new Promise((resolve, reject) => {
    consumer.run({
      autoCommitThreshold: 1,
      eachMessage: async ({ message }) => {
        seen.push(message.value.toString())
        if (seen.length === n) resolve()
      },
    }).catch(reject)
  })
  await consumer.disconnect()
  console.log(JSON.stringify(seen))
}

main().catch(err => { console.error(err); process.exit(1) })
