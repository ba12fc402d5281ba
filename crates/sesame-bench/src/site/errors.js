// Collects script errors and console errors for the self-check
// (selfcheck.js, explore.js), which reports them in its verdict.
window.sesameErrors = [];
window.addEventListener('error', function (e) {
  window.sesameErrors.push(String(e.message || e));
});
(function () {
  var original = console.error;
  console.error = function () {
    window.sesameErrors.push(Array.prototype.join.call(arguments, ' '));
    return original.apply(console, arguments);
  };
})();
