// A kafkajs group consumer that a test steers through stdin, against a
// Ledge node's Kafka listener: node kafkajs_reset.js BROKER TOKEN TOPIC
// GROUP. It prints each record it reads as a JSON line {"offset": "3",
// "key": "..."}, and obeys one command a line: "pause" (prints
// "paused" once the topic is paused), "resume", "stop" (disconnects,
// prints "stopped" and exits). It starts from the beginning when its
// group has no position, commits each record, and resets per that policy
// when its position falls out of the log.
const readline = require('readline')
const { Kafka, logLevel } = require('kafkajs')

const [broker, token, topic, group] = process.argv.slice(2)
const kafka = new Kafka({
  clientId: 'ledge-e2e-reset',
  brokers: [broker],
  sasl: { mechanism: 'plain', username: 'kafkajs', password: token },
  logLevel: logLevel.NOTHING,
  retry: { retries: 3 },
})

function say (v) { process.stdout.write(JSON.stringify(v) + '\n') }

async function main () {
  const consumer = kafka.consumer({ groupId: group, heartbeatInterval: 100, maxWaitTimeInMs: 200 })
  consumer.on(consumer.events.CRASH, e => {
    say({ crash: String(e.payload.error), restart: e.payload.restart })
  })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await consumer.run({
    autoCommitThreshold: 1,
    eachMessage: async ({ message }) => {
      say({ offset: message.offset, key: message.key.toString() })
    },
  })
  const rl = readline.createInterface({ input: process.stdin })
  for await (const line of rl) {
    switch (line.trim()) {
      case 'pause':
        consumer.pause([{ topic }])
        say('paused')
        break
      case 'resume':
        consumer.resume([{ topic }])
        break
      case 'stop':
        await consumer.disconnect()
        say('stopped')
        process.exit(0)
    }
  }
}

main().catch(err => { console.error(err); process.exit(1) })
