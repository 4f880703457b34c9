// Package uitest tests the live view that observe.Handler serves
// in a real browser: headless Chromium driven through the DevTools
// protocol with chromedp. It holds tests only; they skip where no Chromium
// is installed.
package uitest
