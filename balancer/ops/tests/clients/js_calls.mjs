#!/usr/bin/env node
// The official JS Elasticsearch client's everyday calls, made through the balancer, each
// checked against the balancer's /metrics exactly as python_calls.py does: a call expected
// to be routed by the policy must add exactly one answer to ballot_requests_total with a
// reason in {vote, home, overflow, stall-guard} and must not grow
// ballot_client_errors_total; a call expected to be forwarded blind must add exactly one
// answer with reason `fallback`. Every call asks for `{ meta: true }`, so the answer's
// x-ballot-reason header must agree with the metrics too.
//
//   node js_calls.mjs --lb http://127.0.0.1:PORT --admin http://127.0.0.1:APORT
//   node js_calls.mjs --lb http://127.0.0.1:STANDIN_PORT --no-metrics   # client only
//
// One JSON line per case ({client, call, route: "", expect, reason, ok, why, counted,
// client_errors}); exit 0 when every case met its expectation, 1 otherwise.

import { parseArgs } from 'node:util'
import { Client } from '@elastic/elasticsearch'

const POLICY_REASONS = new Set(['vote', 'home', 'overflow', 'stall-guard'])
const REQUESTS = 'ballot_requests_total'
const CLIENT_ERRORS = 'ballot_client_errors_total'

const { values: args } = parseArgs({
  options: {
    lb: { type: 'string' },
    admin: { type: 'string' },
    'no-metrics': { type: 'boolean', default: false },
    'no-headers': { type: 'boolean', default: false },
    only: { type: 'string', default: '' },
    timeout: { type: 'string', default: '10' }
  }
})
if (!args.lb || (!args['no-metrics'] && !args.admin)) {
  console.error('usage: node js_calls.mjs --lb URL (--admin URL | --no-metrics) [--no-headers] [--only TEXT]')
  process.exit(2)
}
const LB = args.lb.replace(/\/+$/, '')
const timeoutMs = Number(args.timeout) * 1000

// No client-side retries: one call must be one request, so the counts are exact.
const common = { node: LB, maxRetries: 0, requestTimeout: timeoutMs }
const es = new Client(common)
const esGz = new Client({ ...common, compression: true })

// Each case's `call` is its function's source text.
const CASES = [
  ['policy', () => es.search({ index: 'books', q: 'red fox' }, { meta: true })],
  ['policy', () => es.search({ index: 'books', query: { match: { title: 'red fox' } } }, { meta: true })],
  ['policy', () => es.search({ index: 'books', query: { bool: { must: [{ match: { title: 'red' } }], filter: [{ term: { lang: 'en' } }] } } }, { meta: true })],
  ['policy', () => es.msearch({ searches: [{ index: 'books' }, { query: { match: { title: 'red' } } }, { index: 'books' }, { query: { match: { title: 'fox' } } }] }, { meta: true })],
  ['policy', () => es.count({ index: 'books', query: { match: { title: 'red fox' } } }, { meta: true })],
  ['policy', () => esGz.search({ index: 'books', query: { match: { title: 'red fox' } } }, { meta: true })],
  ['fallback', () => es.cluster.health({}, { meta: true })]
]

// Prometheus text: sums of the two counters, by reason and by kind.
function parseMetrics (text) {
  const reasons = {}
  const kinds = {}
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line)
    if (!m || (m[1] !== REQUESTS && m[1] !== CLIENT_ERRORS)) continue
    const labels = {}
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c))
    }
    const [into, key] = m[1] === REQUESTS ? [reasons, labels.reason ?? ''] : [kinds, labels.kind ?? '']
    into[key] = (into[key] ?? 0) + Number(m[3])
  }
  return { reasons, kinds }
}

async function scrape () {
  const r = await fetch(args.admin.replace(/\/+$/, '') + '/metrics', { signal: AbortSignal.timeout(timeoutMs) })
  if (!r.ok) throw new Error(`GET /metrics: ${r.status}`)
  return parseMetrics(await r.text())
}

function delta (before, after) {
  const d = {}
  for (const k of [...new Set([...Object.keys(before), ...Object.keys(after)])].sort()) {
    const v = (after[k] ?? 0) - (before[k] ?? 0)
    if (v) d[k] = v
  }
  return d
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
const sum = o => Object.values(o).reduce((a, b) => a + b, 0)

// Scrapes until at least one answer was counted, then once more after a short pause.
async function settle (before) {
  const deadline = Date.now() + 3000
  for (;;) {
    const after = await scrape()
    if (sum(delta(before.reasons, after.reasons)) >= 1 || Date.now() >= deadline) break
    await sleep(20)
  }
  await sleep(100)
  return scrape()
}

const errText = e => `${e?.name ?? 'Error'}: ${e?.message ?? e}`

async function runCase (expect, fn) {
  const call = fn.toString().replace(/^\(\)\s*=>\s*/, '')
  const out = { client: '@elastic/elasticsearch', call, route: '', expect, reason: null, ok: false, why: '' }
  const problems = []
  let before = null
  if (!args['no-metrics']) {
    try {
      before = await scrape()
    } catch (e) {
      out.why = `scraping /metrics before the call: ${errText(e)}`
      return out
    }
  }
  let hreason
  let answered = false
  try {
    const res = await fn()
    answered = true
    hreason = res.headers?.['x-ballot-reason']
  } catch (e) {
    problems.push(errText(e))
  }
  if (args['no-metrics']) {
    out.reason = hreason ?? null
  } else {
    let after = null
    try {
      after = await settle(before)
    } catch (e) {
      problems.push(`scraping /metrics after the call: ${errText(e)}`)
    }
    if (after) {
      const counted = delta(before.reasons, after.reasons)
      const errors = delta(before.kinds, after.kinds)
      Object.assign(out, { counted, client_errors: errors })
      const total = sum(counted)
      if (total === 1) out.reason = Object.keys(counted)[0]
      if (expect === 'policy') {
        if (total !== 1) problems.push(`expected exactly 1 answer counted, got ${total} ${JSON.stringify(counted)}`)
        else if (!POLICY_REASONS.has(out.reason)) problems.push(`routed as ${JSON.stringify(out.reason)}, not by the policy`)
        if (Object.keys(errors).length) problems.push(`ballot_client_errors_total grew: ${JSON.stringify(errors)}`)
      } else if (total !== 1 || out.reason !== 'fallback') {
        problems.push(`expected exactly 1 answer counted as fallback, got ${JSON.stringify(counted)}`)
      }
      if (answered && !args['no-headers']) {
        if (hreason === undefined) problems.push('the answer has no x-ballot-reason header')
        else if (hreason !== out.reason) problems.push(`x-ballot-reason ${JSON.stringify(hreason)} but the metrics say ${JSON.stringify(out.reason)}`)
      }
    }
  }
  out.ok = problems.length === 0
  out.why = problems.join('; ')
  return out
}

let failed = 0
for (const [expect, fn] of CASES) {
  if (args.only && !fn.toString().includes(args.only)) continue
  const out = await runCase(expect, fn)
  if (!out.ok) failed++
  console.log(JSON.stringify(out))
}
await Promise.allSettled([es.close(), esGz.close()])
process.exit(failed ? 1 : 0)
