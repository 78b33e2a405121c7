// Buttons and forms with data-confirm="question" ask before they submit: a button's own
// question wins over its form's. Without JavaScript they submit as they are.
document.addEventListener("submit", (event) => {
  const button = event.submitter;
  const question = button?.dataset.confirm || event.target.dataset.confirm;
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});
