// Logs in to a balancer's status page in headless Chromium (Debian's /usr/bin/chromium,
// driven by playwright-core) and saves a full-page screenshot: the way an operator's
// browser sees it. Used by bench/status-screenshots.sh.
//
//   node status-shot.mjs ADMIN_URL TOKEN OUT.png
//
// Exits 1 when the login fails or the page lacks its replica table.
import { chromium } from 'playwright-core';

const [admin, token, out] = process.argv.slice(2);
if (!admin || !token || !out) {
  console.error('usage: node status-shot.mjs ADMIN_URL TOKEN OUT.png');
  process.exit(2);
}
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await page.goto(`${admin}/admin/status`);
  // No cookie yet: the status page sends the browser to the login form.
  await page.fill('input[name=token]', token);
  await Promise.all([page.waitForURL('**/admin/status'), page.click('button')]);
  const replicas = await page.locator('[id$="-state"]').count();
  if (replicas === 0) {
    console.error(`no replica rows on ${page.url()}`);
    process.exit(1);
  }
  await page.screenshot({ path: out, fullPage: true });
  console.log(`${out}: ${replicas} replicas`);
} finally {
  await browser.close();
}
