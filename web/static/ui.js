// stackd's pages are complete without this script; it only keeps them
// current. Every few seconds it fetches the page again and swaps each
// element with a data-live attribute for its new version, unless both
// carry the same non-empty data-live key (a log being followed). A
// <pre data-follow=URL> streams a running update's log from URL. Only a
// <body data-refresh> page refreshes.
(function () {
  'use strict';

  var period = 5000;
  var following = new WeakMap(); // pre -> AbortController

  // atBottom reports whether el is scrolled to (near) its end.
  function atBottom(el) {
    return el.scrollHeight - el.scrollTop - el.clientHeight < 24;
  }

  // follow replaces pre's server-rendered text with the log streamed from
  // its data-follow URL, keeping the view at the end when it was there.
  function follow(pre) {
    var url = pre.getAttribute('data-follow');
    if (!url || !window.fetch || !window.TextDecoder || !window.AbortController) return;
    var ctl = new AbortController();
    following.set(pre, ctl);
    pre.scrollTop = pre.scrollHeight;
    fetch(url, {signal: ctl.signal, cache: 'no-store'}).then(function (resp) {
      if (!resp.ok || !resp.body) return;
      var reader = resp.body.getReader();
      var dec = new TextDecoder();
      var first = true;
      function pump() {
        return reader.read().then(function (r) {
          var text = r.done ? dec.decode() : dec.decode(r.value, {stream: true});
          if (text) {
            var stick = atBottom(pre);
            if (first) { pre.textContent = ''; first = false; }
            pre.appendChild(document.createTextNode(text));
            if (stick) pre.scrollTop = pre.scrollHeight;
          }
          if (!r.done) return pump();
        });
      }
      return pump();
    }).catch(function () { /* the next refresh shows the log */ });
  }

  // stop ends the streams below el.
  function stop(el) {
    el.querySelectorAll('pre[data-follow]').forEach(function (pre) {
      var ctl = following.get(pre);
      if (ctl) ctl.abort();
    });
  }

  // ids lists the ids of doc's live regions.
  function ids(doc) {
    return Array.prototype.map.call(doc.querySelectorAll('[data-live]'), function (el) {
      return el.id;
    }).join(' ');
  }

  // swap replaces the live regions of the page with those of doc, or
  // reloads the page when doc has other regions (a first update's log).
  function swap(doc) {
    if (ids(doc) !== ids(document)) {
      location.reload();
      return;
    }
    document.querySelectorAll('[data-live]').forEach(function (el) {
      var fresh = el.id && doc.getElementById(el.id);
      if (!fresh) return;
      var key = el.getAttribute('data-live');
      if (key && key === fresh.getAttribute('data-live')) return;
      var node = document.importNode(fresh, true);
      stop(el);
      el.replaceWith(node);
      node.querySelectorAll('pre[data-follow]').forEach(follow);
    });
  }

  var busy = false;
  var timer = null;

  // refresh fetches the page again, while it is visible. Once the session
  // is gone (401) it stops: the next navigation signs in again.
  function refresh() {
    if (busy || document.hidden || timer === false) return;
    busy = true;
    fetch(location.href, {cache: 'no-store', headers: {Accept: 'text/html'}})
      .then(function (resp) {
        if (resp.status === 401) {
          clearInterval(timer);
          timer = false;
        }
        return resp.ok ? resp.text() : null;
      })
      .then(function (html) {
        if (html) swap(new DOMParser().parseFromString(html, 'text/html'));
      })
      .catch(function () { /* try again next time */ })
      .then(function () { busy = false; });
  }

  document.querySelectorAll('pre[data-follow]').forEach(follow);
  if (document.body.hasAttribute('data-refresh') && window.fetch && window.DOMParser) {
    timer = setInterval(refresh, period);
    document.addEventListener('visibilitychange', refresh);
  }
})();
